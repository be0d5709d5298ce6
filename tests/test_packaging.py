"""Packaging as the Comfy Registry and ComfyUI-Manager expect, and what the pack ships to users.

- pyproject: [project] urls.Repository and OS/accelerator classifiers the Registry reads, [tool.comfy]
  Icon/Banner pointing at files of this repository, requires-comfyui as '>=X.Y.Z';
- the Registry's rules on the shipped code (git's files minus .comfyignore): no eval/exec, nothing that
  runs pip or other programs at run time;
- the example inputs the workflows load are shipped and copied into ComfyUI's input folder without
  ever overwriting a user's file; every UI workflow has its template thumbnail.
"""

from __future__ import annotations

import ast
import fnmatch
import glob
import json
import os
import re
import subprocess
import tomllib
from importlib import import_module

import pytest
from PIL import Image

from comfy_harness import ROOT, import_pack

# What comfy_config (ComfyUI's reader of this file) accepts.
REGISTRY_OS_PREFIXES = ("Microsoft", "POSIX", "MacOS", "OS Independent")
REGISTRY_ACCELERATORS = {
    "GPU :: NVIDIA CUDA",
    "GPU :: AMD ROCm",
    "GPU :: Intel Arc",
    "NPU :: Huawei Ascend",
    "GPU :: Apple Metal",
}
FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__"}
FORBIDDEN_MODULES = {"subprocess", "pip", "ensurepip", "runpy", "pty", "multiprocessing"}
FORBIDDEN_OS_CALLS = re.compile(r"^(system|popen|exec\w*|spawn\w*|fork\w*|posix_spawn\w*)$")
LOADERS = {"LoadImage", "LoadImageMask"}


@pytest.fixture(scope="module")
def pyproject() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        return tomllib.load(handle)


def shipped_files() -> list[str]:
    """The Registry archive's files: git's tracked and new files, minus the patterns of .comfyignore."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    with open(os.path.join(ROOT, ".comfyignore"), encoding="utf-8") as handle:
        patterns = [line.strip() for line in handle if line.strip() and not line.startswith("#")]

    def ignored(name: str) -> bool:
        return any(name.startswith(p) if p.endswith("/") else fnmatch.fnmatch(name, p) for p in patterns)

    return [name for name in listed if not ignored(name) and os.path.isfile(os.path.join(ROOT, name))]


def test_project_metadata_for_the_registry(pyproject):
    project = pyproject["project"]
    assert project["name"] and re.fullmatch(r"\d+\.\d+\.\d+", project["version"]) and project["description"]
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", project["urls"]["Repository"])
    systems = [
        c.removeprefix("Operating System :: ") for c in project["classifiers"] if c.startswith("Operating System :: ")
    ]
    accelerators = [
        c.removeprefix("Environment :: ") for c in project["classifiers"] if c.startswith("Environment :: ")
    ]
    assert systems and all(s.startswith(REGISTRY_OS_PREFIXES) for s in systems)
    # ComfyUI-Manager reads an accelerator classifier as exclusive: listing one (say NVIDIA CUDA) marks the pack
    # as conflicting on CPU, Mac and AMD machines. The pack runs wherever ComfyUI does, so it lists none.
    assert set(accelerators) <= REGISTRY_ACCELERATORS and accelerators == []


def test_registry_images_are_files_of_this_repository(pyproject):
    comfy = pyproject["tool"]["comfy"]
    assert comfy["PublisherId"] and comfy["DisplayName"]
    raw = pyproject["project"]["urls"]["Repository"].replace(
        "https://github.com/", "https://raw.githubusercontent.com/"
    )
    for key, size in (("Icon", (400, 400)), ("Banner", None)):
        assert comfy[key].startswith(raw + "/main/"), f"{key} is not a file of {raw}"
        path = os.path.join(ROOT, comfy[key].removeprefix(raw + "/main/"))
        assert path in {os.path.join(ROOT, f) for f in shipped_files()}, f"{key}: {path} is not in the repository"
        with Image.open(path) as image:
            assert size is None or image.size == size, image.size
    assert re.fullmatch(r">=\d+\.\d+\.\d+", comfy["requires-comfyui"])
    assert isinstance(comfy["includes"], list)


def _problems(path: str) -> list[str]:
    """What the Registry's rules forbid in one Python file (read with ast: words in strings do not count)."""
    found = []
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            found.append(f"{path}:{node.lineno} calls {node.func.id}()")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
        ):
            if node.func.value.id == "os" and FORBIDDEN_OS_CALLS.match(node.func.attr):
                found.append(f"{path}:{node.lineno} calls os.{node.func.attr}()")
        elif isinstance(node, ast.Import):
            found += [
                f"{path}:{node.lineno} imports {a.name}"
                for a in node.names
                if a.name.split(".")[0] in FORBIDDEN_MODULES
            ]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] in FORBIDDEN_MODULES
        ):
            found.append(f"{path}:{node.lineno} imports {node.module}")
    return found


def test_shipped_code_runs_no_eval_exec_pip_or_programs():
    files = [os.path.join(ROOT, f) for f in shipped_files()]
    python = [f for f in files if f.endswith(".py")]
    assert any(f.endswith("nodes/host/__init__.py") for f in python) and not any("/tests/" in f for f in python)
    problems = [p for f in python for p in _problems(f)]
    for script in (f for f in files if f.endswith(".js")):
        text = open(script, encoding="utf-8").read()
        problems += [f"{script}: {m.group(0)}" for m in re.finditer(r"\beval\s*\(|new\s+Function\s*\(", text)]
    assert problems == []


def test_the_rules_see_a_forbidden_call(tmp_path):
    """The scan above is not vacuous: it finds each kind of thing it forbids."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import subprocess\nfrom pip import main\nimport os\nos.system('x')\neval('1')\nmodel.eval()\nre.compile('x')\n"
    )
    assert [p.split(" ", 1)[1] for p in _problems(str(bad))] == [
        "imports subprocess",
        "imports pip",
        "calls os.system()",
        "calls eval()",
    ]


BUILD_ARTEFACTS = (".whl", ".egg", ".tar.gz", ".tgz", ".zip", ".pyc", ".so", ".dll", ".dylib", ".exe")


def test_no_build_artefacts_are_tracked():
    """Wheels, archives and compiled files never belong in the repository (nor in the Registry archive made from it)."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    assert [name for name in tracked if name.lower().endswith(BUILD_ARTEFACTS)] == []


def test_development_files_are_left_out_of_the_archive():
    shipped = shipped_files()
    assert not any(f.startswith(("tests/", ".ci/", "benchmarks/")) for f in shipped)
    assert {
        "__init__.py",
        "web/masc_scores.js",
        "example_inputs/masc_example_dog_00.jpg",
        "subgraphs/MaSC best-of-N.json",
        "subgraphs/MaSC score a pair.json",
    } <= set(shipped)


def test_requirements_never_install_torch():
    """ComfyUI-Manager installs requirements.txt; torch comes with ComfyUI and must not be replaced."""
    with open(os.path.join(ROOT, "requirements.txt"), encoding="utf-8") as handle:
        names = [
            re.split(r"[<>=!~\[; ]", line.strip())[0].lower()
            for line in handle
            if line.strip() and not line.startswith("#")
        ]
    assert names and not {"torch", "torchvision", "torchaudio"} & set(names)


# --- example inputs and templates -------------------------------------------------------------------------


def _loaded_files(path: str) -> set[str]:
    with open(path, encoding="utf-8") as handle:
        graph = json.load(handle)
    if "nodes" in graph:  # UI format: the file name is the first widget value
        return {n["widgets_values"][0] for n in graph["nodes"] if n["type"] in LOADERS}
    return {n["inputs"]["image"] for n in graph.values() if n["class_type"] in LOADERS}


WORKFLOW_FILES = sorted(
    glob.glob(os.path.join(ROOT, "workflows", "*.json")) + glob.glob(os.path.join(ROOT, "workflows", "api", "*.json"))
)


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: os.path.relpath(p, ROOT))
def test_workflows_load_only_shipped_example_inputs(path):
    shipped = set(os.listdir(os.path.join(ROOT, "example_inputs")))
    assert _loaded_files(path) <= shipped


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "workflows", "*.json"))), ids=os.path.basename)
def test_every_ui_workflow_has_its_template_thumbnail(path):
    thumbnail = path[: -len(".json")] + ".jpg"
    assert os.path.isfile(thumbnail), "the templates browser would show a blank card"
    with Image.open(thumbnail) as image:
        assert image.format == "JPEG" and image.size[0] >= 256 and image.size[1] >= 256


def test_template_names_read_in_order():
    """The front-end extension lists our templates by name: a number first keeps 1..N in order."""
    stems = [os.path.basename(p)[:-5] for p in sorted(glob.glob(os.path.join(ROOT, "workflows", "*.json")))]
    numbers = [int(s.split("_", 1)[0]) for s in stems]
    assert numbers == list(range(1, len(stems) + 1))


@pytest.fixture
def host_module():
    return import_module(import_pack().__name__ + ".nodes.host")


def test_examples_are_copied_once_and_never_over_a_users_file(host_module, tmp_path):
    examples = sorted(n for n in os.listdir(os.path.join(ROOT, "example_inputs")) if n.startswith("masc_example_"))
    users = tmp_path / examples[0]
    users.write_bytes(b"the user's own picture")
    copied = host_module.copy_example_inputs(str(tmp_path))
    assert copied == examples[1:]
    assert users.read_bytes() == b"the user's own picture"
    assert sorted(os.listdir(tmp_path)) == examples  # the README stays in the pack
    for name in copied:
        assert (tmp_path / name).read_bytes() == open(os.path.join(ROOT, "example_inputs", name), "rb").read()
    assert host_module.copy_example_inputs(str(tmp_path)) == []


def test_an_input_folder_that_cannot_be_written_only_logs(host_module, tmp_path, caplog):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the input folder should be")
    assert host_module.copy_example_inputs(str(blocked)) == []
    assert "example inputs not copied" in caplog.text


def test_one_version_everywhere():
    """The version saved with every score (PNG metadata, score logs) is the package's, as pyproject.toml declares it."""
    import re

    from masc_core import __version__
    from masc_core.version import __version__ as metric_version

    declared = re.search(
        r'^version = "([^"]+)"', open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8").read(), re.M
    ).group(1)
    assert __version__ == metric_version == declared


def test_requirements_are_pyprojects_dependencies_without_torch(pyproject):
    """One dependency story: ComfyUI-Manager installs requirements.txt (never torch); pip installs pyproject's list."""
    with open(os.path.join(ROOT, "requirements.txt"), encoding="utf-8") as handle:
        required = [line.strip() for line in handle if line.strip() and not line.startswith("#")]
    declared = [d for d in pyproject["project"]["dependencies"] if not re.match(r"torch\b", d)]
    assert required == declared
    assert any(re.match(r"torch\b", d) for d in pyproject["project"]["dependencies"])


def _comfy_node_validate(folder: str) -> subprocess.CompletedProcess:
    command = os.environ.get("MASC_COMFY_CLI")
    if not command:
        pytest.skip(
            "comfy node validate: set MASC_COMFY_CLI to a comfy-cli executable (.ci/run installs comfy-cli 1.23)"
        )
    return subprocess.run(
        [command, "--skip-prompt", "--no-enable-telemetry", "node", "validate"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_comfy_node_validate_passes_with_no_security_warning():
    """comfy-cli's validation (as the Registry runs it on publish): pyproject parsed, security rules clean."""
    done = _comfy_node_validate(ROOT)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert "All validation checks passed" in said and "Security warnings found" not in said, said


def test_comfy_node_validate_sees_a_planted_eval(tmp_path):
    """The check above is not vacuous: the same command flags an eval() in a copy of the pack."""
    copy = tmp_path / "pack"
    for name in ("pyproject.toml", "__init__.py"):
        os.makedirs(copy, exist_ok=True)
        with open(os.path.join(ROOT, name), "rb") as source, open(copy / name, "wb") as target:
            target.write(source.read())
    (copy / "planted.py").write_text('value = eval("1")\n')
    done = _comfy_node_validate(str(copy))
    said = done.stdout + done.stderr
    assert "Security warnings found" in said and "planted.py" in said, said


def test_the_entry_file_imported_on_its_own_registers_nothing_and_does_not_fail():
    """pytest imports the root __init__.py as a lone module when the clone's folder is no identifier (README clones into
    masc-comfyui): it must not fail there (every test would error) and must register nothing."""
    import importlib.machinery
    import importlib.util

    class LoneFile(importlib.machinery.SourceFileLoader):
        def is_package(self, fullname):  # as pytest imports it then: a module with no package around it
            return False

    loader = LoneFile("lone_entry_file", os.path.join(ROOT, "__init__.py"))
    spec = importlib.util.spec_from_loader("lone_entry_file", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    assert module.__package__ == "" and module.__all__ == ["WEB_DIRECTORY"] and not hasattr(module, "comfy_entrypoint")
