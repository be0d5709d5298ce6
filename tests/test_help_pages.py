"""Each node's help page for the front end's node library (``web/docs/<NodeClass>.md``, served by ComfyUI at
``/extensions/<pack>/docs/<NodeClass>.md``) and its search aliases (ComfyUI 0.33 reads ``SEARCH_ALIASES``)."""

from __future__ import annotations

import os
import re

import pytest

from comfy_harness import ROOT, import_pack

NODES = import_pack().nodes.NODE_CLASS_MAPPINGS
DOCS = os.path.join(ROOT, "web", "docs")


def page(node_id: str) -> str:
    with open(os.path.join(DOCS, node_id + ".md"), encoding="utf-8") as handle:
        return handle.read()


@pytest.mark.parametrize("node_id", sorted(NODES))
def test_every_node_has_a_help_page_naming_each_input_and_output(node_id):
    text = page(node_id)
    node_class = NODES[node_id]
    assert text.startswith(f"# {import_pack().nodes.NODE_DISPLAY_NAME_MAPPINGS[node_id]}\n")
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    assert headings == ["Inputs", "Outputs", "Example", "Pitfalls"]
    inputs_part = text.split("## Inputs", 1)[1].split("## Outputs", 1)[0]
    outputs_part = text.split("## Outputs", 1)[1].split("## Example", 1)[0]
    declared = node_class.INPUT_TYPES()
    for section in ("required", "optional"):
        for name in declared.get(section, {}):
            assert f"- **{name}** (" in inputs_part, f"{node_id}: input {name} is not on its help page"
    for name, kind in zip(node_class.RETURN_NAMES, node_class.RETURN_TYPES):
        assert f"- **{name}** ({kind})" in outputs_part, f"{node_id}: output {name} is not on its help page"
    assert len(text) < 6000  # the panel is narrow: short pages


def test_no_page_for_a_node_that_does_not_exist():
    assert sorted(name[:-3] for name in os.listdir(DOCS) if name.endswith(".md")) == sorted(
        NODES
    )  # images/ holds their pictures


@pytest.mark.parametrize("node_id", sorted(NODES))
def test_search_aliases_are_short_lowercase_words(node_id):
    aliases = NODES[node_id].SEARCH_ALIASES
    assert aliases and all(isinstance(a, str) and a == a.lower() and 0 < len(a) <= 30 for a in aliases)
    assert len(set(aliases)) == len(aliases)


def test_readme_links_every_help_page():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    for node_id in NODES:
        assert f"(web/docs/{node_id}.md)" in readme, node_id


def prose(text: str) -> str:
    """``text`` without its code blocks and code spans: what markdown renders as prose."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))


@pytest.mark.parametrize("name", sorted(os.listdir(DOCS)))
def test_formulas_are_not_rendered_as_italics(name):
    """'cp_weight*CP + pf_weight*PF' rendered as 'cp_weightCP + pf_weightPF' in italics: a '*' between two word
    characters outside code opens emphasis; formulas go in code spans."""
    if not name.endswith(".md"):
        return
    with open(os.path.join(DOCS, name), encoding="utf-8") as handle:
        text = prose(handle.read())
    assert not re.search(r"\w\*\w", text), re.search(r".{0,30}\w\*\w.{0,30}", text).group(0)


def test_tooltips_and_descriptions_stay_short_the_help_page_holds_the_rest():
    """Core's V3 schema shows tooltips on hover and the description under the node's name: one glance each. The long
    explanations live in web/docs/<node>.md (the help panel)."""
    from comfy_harness import import_pack

    long = []
    for node_id, cls in import_pack().nodes.NODE_CLASS_MAPPINGS.items():
        for section, entries in cls.INPUT_TYPES().items():
            for name, entry in entries.items() if section != "hidden" else ():
                if len(entry[1].get("tooltip", "")) > TOOLTIP_MOST:
                    long.append(f"{node_id}.{name}")
        long += [f"{node_id} output {i}" for i, tip in enumerate(cls.OUTPUT_TOOLTIPS) if len(tip) > TOOLTIP_MOST]
        if len(cls.DESCRIPTION) > DESCRIPTION_MOST:
            long.append(f"{node_id} description")
    assert not long, long


TOOLTIP_MOST, DESCRIPTION_MOST = 150, 320
