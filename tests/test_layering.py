"""The layout's rules, read from the source (ast), not from what happens to be imported.

- ``masc_core`` never imports the node pack or ComfyUI;
- the pure modules import no model code (nor the libraries that load models);
- every module of masc_core has a layer, and the layers only import downwards: shared < io < metric < selection <
  models < scoring < evaluation < cli; the pure ones (shared to selection) import no model code;
- nothing imports ``masc_core.cli`` but ``masc_core.__main__``, and nothing imports ``masc_core.testing``;
- inside the pack every import of the pack is relative (ComfyUI has a top-level ``nodes`` of its own),
  and only ``nodes/host/`` talks to ComfyUI;
- no import cycles, function-level imports included;
- no module over 400 lines (no exception: a longer one is split by concern), no function over 80 lines in
  ``masc_core``.
"""

from __future__ import annotations

import ast
import os

import pytest

from conftest import ROOT

SHARED = {
    "masc_core.errors",
    "masc_core.defaults",
    "masc_core.lazy",
    "masc_core.limits",
    "masc_core.progress",
    "masc_core.resources",
    "masc_core.version",
    "masc_core.safe_text",
}
"""The modules at masc_core's root that every layer shares (a new root module fails until it is placed here)."""
LAYERS = [
    ("shared", lambda m: m in SHARED),
    ("io", lambda m: m.startswith("masc_core.io")),
    ("metric", lambda m: m.startswith("masc_core.metric")),
    ("selection", lambda m: m.startswith("masc_core.selection")),
    ("models", lambda m: m.startswith("masc_core.models")),
    ("scoring", lambda m: m.startswith("masc_core.scoring")),
    ("evaluation", lambda m: m.startswith("masc_core.evaluation")),
    ("cli", lambda m: m.startswith("masc_core.cli") or m == "masc_core.__main__"),
]
"""Every module of masc_core but its public facade (``masc_core``) and ``testing``, by package, lowest first: a module
imports only from its own layer or below (selection rests on metric, never on models)."""
UNLAYERED = {"masc_core", "masc_core.testing"}
"""The public facade (it gathers every layer) and the test builders (nothing imports them): outside the order."""
PURE_LAYERS = ("shared", "io", "metric", "selection")
PURE = set()  # filled below from the layers: the modules that import no model code
COMFYUI_MODULES = {
    "comfy",
    "comfy_api",
    "comfy_execution",
    "comfy_extras",
    "folder_paths",
    "server",
    "execution",
    "latent_preview",
    "node_helpers",
    "nodes",
}
MODEL_LIBRARIES = {"transformers", "safetensors", "tokenizers", "huggingface_hub"}


def _source_files() -> dict[str, str]:
    """Module name -> path, for the pack (``__init__``, ``nodes.*``) and ``masc_core.*``."""
    found = {"__init__": os.path.join(ROOT, "__init__.py")}
    for top in ("masc_core", "nodes"):
        for folder, _, names in os.walk(os.path.join(ROOT, top)):
            for name in names:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
                    if parts[-1] == "__init__":
                        parts = parts[:-1]
                    found[".".join(parts)] = path
    return found


MODULES = _source_files()
PURE.update(m for m in MODULES if m.startswith("masc_core") and any(LAYERS[i][1](m) for i in range(len(PURE_LAYERS))))


def _package_of(module: str, path: str) -> list[str]:
    parts = [] if module == "__init__" else module.split(".")
    return parts if path.endswith("__init__.py") else parts[:-1]


def _imports(module: str, path: str) -> list[tuple[str, int, bool]]:
    """(imported module, line, relative?) for every import in the file, inside functions too."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    package = _package_of(module, path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno, False) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                found.append((node.module, node.lineno, False))
                continue
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                candidate = f"{target}.{alias.name}" if target else alias.name
                found.append((candidate if candidate in MODULES else (target or "__init__"), node.lineno, True))
    return found


def _internal(name: str) -> str | None:
    """The module of ours an import names (a submodule's package when the name is inside it), or None."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def _layer(module: str) -> int | None:
    return next((i for i, (_, test) in enumerate(LAYERS) if test(module)), None)


def test_every_library_module_has_a_layer():
    """A module outside every layer would be outside the rules below: each one of masc_core is placed."""
    unplaced = [
        m
        for m in MODULES
        if m.startswith("masc_core")
        and _layer(m) is None
        and m not in UNLAYERED
        and not m.startswith("masc_core.testing")
    ]
    assert not unplaced, f"{unplaced}: add them to a layer (or SHARED) in tests/test_layering.py"


MAPPED_PACKAGES = ("io", "scoring", "selection", "evaluation")
"""The library packages whose docstring is their map: it names each of their modules."""


@pytest.mark.parametrize("package", MAPPED_PACKAGES)
def test_each_package_docstring_names_every_module(package):
    """A package's map tells the truth: a module it leaves out (a new one, or one split off) fails here."""
    path = os.path.join(ROOT, "masc_core", package, "__init__.py")
    docstring = ast.get_docstring(ast.parse(open(path, encoding="utf-8").read())) or ""
    prefix = f"masc_core.{package}."
    modules = sorted(m[len(prefix) :] for m in MODULES if m.startswith(prefix) and "." not in m[len(prefix) :])
    unnamed = [m for m in modules if f"``{m}``" not in docstring]
    assert modules and not unnamed, f"masc_core/{package}/__init__.py does not name {unnamed}"


def test_masc_core_never_imports_the_pack_or_comfyui():
    bad = [
        f"{m}:{line} imports {name}"
        for m, imports in GRAPH.items()
        if m.startswith("masc_core")
        for name, line, relative in imports
        if name.split(".")[0] in COMFYUI_MODULES or (relative and name.split(".")[0] == "nodes")
    ]
    assert not bad, bad


def test_pure_modules_import_no_model_code():
    bad = [
        f"{m}:{line} imports {name}"
        for m, imports in GRAPH.items()
        if m in PURE
        for name, line, _ in imports
        if name.split(".")[0] in MODEL_LIBRARIES or (name.startswith("masc_core") and _internal(name) not in PURE)
    ]
    assert not bad, bad


def test_layers_only_import_downwards():
    bad = []
    for module, imports in GRAPH.items():
        own = _layer(module)
        if own is None:
            continue
        for name, line, _ in imports:
            target = _internal(name)
            theirs = _layer(target) if target else None
            if theirs is not None and theirs > own:
                bad.append(f"{module} ({LAYERS[own][0]}):{line} imports {target} ({LAYERS[theirs][0]})")
    assert not bad, bad


@pytest.mark.parametrize(
    "package,allowed",
    [
        ("masc_core.cli", {"masc_core.__main__"}),
        ("masc_core.testing", set()),
    ],
)
def test_nothing_imports_the_cli_or_the_test_builders(package, allowed):
    bad = [
        f"{m}:{line} imports {name}"
        for m, imports in GRAPH.items()
        if not m.startswith(package) and m not in allowed
        for name, line, _ in imports
        if (_internal(name) or "").startswith(package)
    ]
    assert not bad, bad


def test_the_pack_imports_itself_relatively_and_only_host_talks_to_comfyui():
    bad = []
    for module, imports in GRAPH.items():
        if module.startswith("masc_core"):
            continue
        for name, line, relative in imports:
            top = name.split(".")[0]
            if not relative and top in ("masc_core", "nodes"):
                bad.append(f"{module}:{line} imports {name} absolutely (ComfyUI's own 'nodes' would win)")
            elif (
                not relative
                and top in COMFYUI_MODULES
                and not (module == "nodes.host" or module.startswith("nodes.host."))
            ):
                bad.append(f"{module}:{line} imports ComfyUI's {name}: go through nodes/host/")
    assert not bad, bad


def test_no_import_cycles():
    edges = {m: sorted({_internal(n) for n, _, _ in imports} - {None, m}) for m, imports in GRAPH.items()}
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in edges[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in edges:
        if module not in index:
            visit(module)
    assert not cycles, cycles


def test_the_rules_see_the_code():
    """The checks above would be empty if the reader found nothing: it finds the known edges."""
    assert len(MODULES) > 40
    assert "masc_core.models.encoder" in {_internal(n) for n, _, _ in GRAPH["masc_core.scoring.batch"]}
    assert "masc_core.scoring.batch" in {_internal(n) for n, _, _ in GRAPH["nodes.scoring_nodes"]}
    assert _layer("masc_core.evaluation.metrics.clip") == 6 and _layer("masc_core.metric.report") == 2
    assert "masc_core.selection.sample_until" in PURE and "masc_core.scoring.candidates" not in PURE


MAX_MODULE_LINES = 400
"""The house's bound on a module of the pack or the library, with no exception: a longer one is split by concern."""


def test_modules_and_functions_stay_readable():
    bad = []
    for module, path in MODULES.items():
        text = open(path, encoding="utf-8").read()
        lines = text.count("\n")
        if lines > MAX_MODULE_LINES:
            bad.append(f"{module}: {lines} lines, over the bound of {MAX_MODULE_LINES}: split it by concern")
        if not module.startswith("masc_core"):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80:
                bad.append(f"{module}.{node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert not bad, bad


def test_the_library_root_holds_few_modules_beside_its_packages():
    """masc_core is grouped by what it does (io/, metric/, models/, scoring/, selection/, evaluation/, cli/, testing/):
    its root
    keeps only what every layer shares, not a drawer of flat modules."""
    root = os.path.join(ROOT, "masc_core")
    modules = sorted(n for n in os.listdir(root) if n.endswith(".py") and n not in ("__init__.py", "__main__.py"))
    assert len(modules) <= 8, modules
    packages = sorted(n for n in os.listdir(root) if os.path.isfile(os.path.join(root, n, "__init__.py")))
    assert packages == ["cli", "evaluation", "io", "metric", "models", "scoring", "selection", "testing"]


MAX_RELAYED_KEYWORDS = 5
"""How many of its own parameters a function may hand on by the same keyword in one call (``f(a=a, b=b, ...)``):
more is a value retyped on its way down; build it once (a rules value, a settings dataclass, the node's mapping)."""


def _relays(tree: ast.AST):
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        arguments = function.args
        own = {a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs}
        for call in ast.walk(function):
            if isinstance(call, ast.Call):
                relayed = [
                    k.arg
                    for k in call.keywords
                    if k.arg in own and isinstance(k.value, ast.Name) and k.value.id == k.arg
                ]
                yield function.name, call.lineno, relayed


def test_no_call_relays_more_than_five_of_its_callers_keywords():
    bad = [
        f"{module}:{line} {name} hands on {len(relayed)} of its parameters by keyword ({', '.join(relayed)})"
        for module, path in MODULES.items()
        for name, line, relayed in _relays(ast.parse(open(path, encoding="utf-8").read()))
        if len(relayed) > MAX_RELAYED_KEYWORDS
    ]
    assert not bad, bad


def test_the_relay_rule_sees_a_relay():
    """The check above is not empty by construction: it counts a six-keyword relay."""
    source = "def f(a, b, c, d, e, g, h):\n    return k(a=a, b=b, c=c, d=d, e=e, g=g, h=1)\n"
    assert [len(r) for _, _, r in _relays(ast.parse(source))] == [6]
