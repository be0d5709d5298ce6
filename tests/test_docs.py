"""The documentation's shape: README a short front door, every link and anchor resolving, the layout true to the
tree."""

from __future__ import annotations

import os
import re

import pytest

from conftest import ROOT

README_BUDGET = 250
"""README is the front door: what, install, models, first workflow, main job, tests, links. Reference lives in docs/."""


def markdown_files() -> list[str]:
    found = ["README.md", "CONTRIBUTING.md"]
    for folder in ("docs", os.path.join("web", "docs")):
        found += sorted(
            os.path.join(folder, name) for name in os.listdir(os.path.join(ROOT, folder)) if name.endswith(".md")
        )
    return found


def without_code(text: str) -> str:
    return re.sub(r"```.*?```", "", text, flags=re.S)


def anchors(path: str) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation dropped, spaces as hyphens."""
    text = without_code(open(path, encoding="utf-8").read())
    found = set()
    for heading in re.findall(r"^#+ (.+)$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def test_readme_stays_a_front_door():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        text = handle.read()
    assert text.count("\n") <= README_BUDGET, f"README.md has {text.count(chr(10))} lines: move reference into docs/"
    for heading in ("## Install", "## Models", "## Your first workflow", "### Run the main job", "### Run the tests"):
        assert f"\n{heading}\n" in text, heading
    assert "<this repository>" not in text and "issue " not in text.lower()


@pytest.mark.parametrize("document", markdown_files())
def test_every_relative_link_and_anchor_resolves(document):
    """``[text](path#anchor)``: the file exists and, for a Markdown file, has that heading."""
    path = os.path.join(ROOT, document)
    text = without_code(open(path, encoding="utf-8").read())
    broken = []
    for target in sorted({m.group(1) for m in re.finditer(r"\]\(([^)\s]+)\)", text)}):
        if re.match(r"[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        linked = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        if not os.path.exists(linked):
            broken.append(target)
        elif anchor and linked.endswith(".md") and anchor not in anchors(linked):
            broken.append(target)
    assert broken == [], f"{document} links to what does not exist: {broken}"


def test_every_moved_section_is_one_click_from_the_readme():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    for document in [
        "CONTRIBUTING.md",
        *(f"docs/{name}" for name in sorted(os.listdir(os.path.join(ROOT, "docs"))) if name.endswith(".md")),
    ]:
        assert f"({document})" in readme or f"({document}#" in readme, f"README does not link {document}"


def _layout_names() -> list[tuple[str, str]]:
    """(kind, path) of every file and folder CONTRIBUTING.md's layout block names, paths from the repository's root."""
    with open(os.path.join(ROOT, "CONTRIBUTING.md"), encoding="utf-8") as handle:
        text = handle.read()
    block = re.search(r"## Layout\n\n```\n(.*?)```", text, flags=re.S).group(1)
    names, parents = [], {0: ""}
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent >= 12:  # a description continued
            continue
        level = indent // 2
        for token in re.split(r"\s{2,}", line.strip())[0].split():
            path = parents[level] + token
            if token.endswith("/"):
                names.append(("folder", path.rstrip("/")))
                parents[level + 1] = path
            else:
                names.append(("file", path))
    return names


def test_the_layout_names_only_what_exists():
    missing = [path for kind, path in _layout_names() if not os.path.exists(os.path.join(ROOT, path))]
    assert missing == [], f"CONTRIBUTING.md's layout names what the tree lacks: {missing}"


def test_the_layout_names_every_package_and_every_module_of_the_pack_and_the_library_root():
    named = {path for _, path in _layout_names()}
    expected = set()
    for top in ("masc_core", "nodes"):
        for folder, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            if "__init__.py" in files:
                expected.add(os.path.relpath(folder, ROOT).replace(os.sep, "/"))
    for top in ("masc_core", "nodes"):
        expected |= {
            f"{top}/{name}"
            for name in os.listdir(os.path.join(ROOT, top))
            if name.endswith(".py") and name != "__init__.py"
        }
    assert sorted(expected - named) == [], "CONTRIBUTING.md's layout does not name these"
