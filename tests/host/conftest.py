"""What a host-suite session sets up, once, against the ComfyUI named by the environment.

- ``MASC_COMFYUI_DIR``: a ComfyUI checkout; ``MASC_COMFYUI_PYTHON``: the interpreter it runs with.
  Unset: every test in this folder is skipped with one line saying so.
- The pack is installed as a user installs it: the repository's files (what a clone holds; never
  ``.git`` or ``.ci``) copied to ``<ComfyUI>/custom_nodes/<MASC_PACK_NAME, default masc-comfyui>``.
- Random-weight checkpoints: a tiny SigLIP2 and a tiny CLIPSeg built with ``masc_core.testing`` in
  this interpreter, once, into a cache (``MASC_HOST_CACHE``, default ``~/.cache/masc-comfyui/host-tests``)
  and copied to ``models/masc``, ``models/clipseg`` (the CLIPSeg tokenizer builder is not
  reproducible and weights differ between torch versions: every host gets the same files);
  a full-size SD1.5 built by the host's own code (``build_sd15.py``) into
  ``models/checkpoints/masc-host-test-sd15.safetensors`` the first time and reused after
  (``MASC_HOST_SD15`` names another file to build or reuse).
- One server per session on 127.0.0.1 and a free port of 18000-18099 (``MASC_HOST_PORTS``), with
  only this pack loaded and its own input/output/temp/user folders under the session's output
  folder (``MASC_HOST_OUTPUT``, default in pytest's temporary folder), so other people using the
  same ComfyUI checkout are not disturbed; stopped by its PID at the end. Screenshots and logs
  stay in the output folder.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest

from . import hostapi

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SKIP_REASON = (
    "real-ComfyUI tests: set MASC_COMFYUI_DIR (a ComfyUI checkout) and MASC_COMFYUI_PYTHON (its "
    "interpreter) to run them"
)
ENCODER_NAME = "masc-host-test-siglip2"
SEGMENTER_NAME = "masc-host-test-clipseg"
SAM3_NAME = "masc-host-test-sam3"
NOT_SIGLIP_NAME = "masc-host-test-not-siglip2"
SD15_NAME = "masc-host-test-sd15.safetensors"
EXAMPLE_PREFIX = "masc_example_"
NEVER_COPIED = {".git", ".ci", "__pycache__", ".pytest_cache", "build", "dist"}


def host_configured() -> bool:
    return bool(os.environ.get("MASC_COMFYUI_DIR") and os.environ.get("MASC_COMFYUI_PYTHON"))


def pytest_collection_modifyitems(config, items):
    if host_configured():
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        if str(item.path).startswith(HERE + os.sep):
            item.add_marker(skip)


@dataclass
class Host:
    """The ComfyUI under test."""

    dir: str
    python: str
    version: tuple[int, ...]
    frontend: str | None
    pack_name: str

    @property
    def label(self) -> str:
        return ".".join(map(str, self.version))

    @property
    def pack_dir(self) -> str:
        return os.path.join(self.dir, "custom_nodes", self.pack_name)

    def models(self, kind: str) -> str:
        return os.path.join(self.dir, "models", kind)

    def run_python(self, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        return subprocess.run(
            [self.python, *args], cwd=self.dir, env=env, capture_output=True, text=True, timeout=timeout
        )


def _read_version(comfy_dir: str) -> tuple[int, ...]:
    with open(os.path.join(comfy_dir, "comfyui_version.py"), encoding="utf-8") as handle:
        text = handle.read()
    value = text.split("__version__", 1)[1].split("=", 1)[1].strip().splitlines()[0].strip("\"' ")
    return tuple(int(part) for part in value.split("."))


@pytest.fixture(scope="session")
def host() -> Host:
    comfy_dir = os.path.abspath(os.environ["MASC_COMFYUI_DIR"])
    python = os.environ["MASC_COMFYUI_PYTHON"]
    assert os.path.isfile(os.path.join(comfy_dir, "main.py")), f"MASC_COMFYUI_DIR={comfy_dir} holds no ComfyUI main.py"
    assert os.access(python, os.X_OK), f"MASC_COMFYUI_PYTHON={python} is not an executable"
    found = subprocess.run(
        [python, "-c", "from importlib.metadata import version; print(version('comfyui-frontend-package'))"],
        capture_output=True,
        text=True,
    )
    frontend = found.stdout.strip() if found.returncode == 0 else None
    return Host(comfy_dir, python, _read_version(comfy_dir), frontend, os.environ.get("MASC_PACK_NAME", "masc-comfyui"))


OUTPUT_KEY = pytest.StashKey[str]()


@pytest.fixture(scope="session")
def out_dir(host, tmp_path_factory, request) -> str:
    """Where this session keeps logs, screenshots and the server's own folders."""
    base = os.environ.get("MASC_HOST_OUTPUT")
    if base:
        folder = os.path.join(os.path.abspath(base), f"comfyui-{host.label}-{time.strftime('%Y%m%d-%H%M%S')}")
        os.makedirs(folder)
    else:
        folder = str(tmp_path_factory.mktemp(f"comfyui-{host.label}"))
    request.config.stash[OUTPUT_KEY] = folder
    return folder


def pytest_terminal_summary(terminalreporter):
    folder = terminalreporter.config.stash.get(OUTPUT_KEY, None)
    if folder:
        terminalreporter.write_line(f"host suite output (logs, screenshots): {folder}")


# --- the pack, as a user installs it ------------------------------------------------------------------------


def pack_files(root: str = ROOT) -> list[str]:
    """Paths (relative to ``root``) a user's copy of the repository holds: tracked and new files, not ignored ones."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    if listed.returncode == 0:
        names = [name for name in listed.stdout.split("\0") if name]
    else:  # not a git checkout: everything but caches
        names = []
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in NEVER_COPIED and not d.endswith(".egg-info")]
            names += [os.path.relpath(os.path.join(folder, f), root) for f in files if not f.endswith(".pyc")]
    return sorted(
        name
        for name in names
        if not set(name.split("/")) & NEVER_COPIED
        and os.path.isfile(os.path.join(root, name))
        and not name.startswith("tests/host/output")
    )


def install_pack(host: Host) -> list[str]:
    """Replace ``custom_nodes/<name>`` with a fresh copy of the pack's files; the list copied."""
    names = pack_files()
    if os.path.exists(host.pack_dir):
        shutil.rmtree(host.pack_dir)
    for name in names:
        target = os.path.join(host.pack_dir, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, name), target)
    return names


# --- random-weight checkpoints -------------------------------------------------------------------------------


def _builder_digest() -> str:
    digest = hashlib.sha256()
    for name in ("checkpoints.py", "clipseg_checkpoint.py", "sam3_checkpoint.py"):
        with open(os.path.join(ROOT, "masc_core", "testing", name), "rb") as handle:
            digest.update(handle.read())
    return digest.hexdigest()[:12]


@pytest.fixture(scope="session")
def tiny_models() -> dict:
    """The tiny SigLIP2, CLIPSeg and SAM3 folders, built once (per builder version) and reused by every host."""
    cache = os.environ.get("MASC_HOST_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "masc-comfyui", "host-tests"
    )
    folder = os.path.join(cache, f"checkpoints-{_builder_digest()}")
    paths = {
        "encoder": os.path.join(folder, ENCODER_NAME),
        "segmenter": os.path.join(folder, SEGMENTER_NAME),
        "sam3": os.path.join(folder, SAM3_NAME),
    }
    if not os.path.isfile(os.path.join(folder, "complete")):
        from masc_core.testing import build_checkpoint, build_clipseg_checkpoint, build_sam3_checkpoint, train_tokenizer

        shutil.rmtree(folder, ignore_errors=True)
        build_checkpoint(paths["encoder"], naflex=True, tokenizer=train_tokenizer(), seed=1)
        build_clipseg_checkpoint(paths["segmenter"], seed=0)
        build_sam3_checkpoint(paths["sam3"], seed=0)  # the driver's transformers 5 (.ci/venv) builds it
        with open(os.path.join(folder, "complete"), "w") as handle:
            handle.write("built by tests/host/conftest.py\n")
    return paths


def _copy_folder(source: str, target: str) -> None:
    if os.path.exists(target):
        shutil.rmtree(target)
    shutil.copytree(source, target)


@pytest.fixture(scope="session")
def sd15(host) -> str:
    """A random-weight SD1.5 the host can load as ``SD15_NAME``; built by the host's code once, then reused."""
    target = os.path.join(host.models("checkpoints"), SD15_NAME)
    source = os.environ.get("MASC_HOST_SD15") or target
    if not os.path.isfile(source):
        os.makedirs(os.path.dirname(os.path.abspath(source)), exist_ok=True)
        built = host.run_python(os.path.join(HERE, "build_sd15.py"), host.dir, os.path.abspath(source))
        assert built.returncode == 0, (
            f"building SD1.5 with the host's code failed:\n{built.stdout}\n{built.stderr[-4000:]}"
        )
        print(built.stdout.strip())  # what was built and how long it took (shown with -s, kept in the log with -rA)
    if os.path.abspath(source) != target:
        if os.path.lexists(target):
            os.remove(target)
        os.symlink(os.path.abspath(source), target)
    return SD15_NAME


TEST_LORAS = [f"masc-test-epoch{k}.safetensors" for k in (1, 2, 3)]
FOREIGN_LORA = "masc-test-foreign.safetensors"


def template_lora_names() -> list[str]:
    """The LoRA files the shipped templates name (a user's own epochs: the suite stands its test LoRAs in)."""
    names = set()
    folder = os.path.join(ROOT, "workflows", "api")
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as handle:
            graph = json.load(handle)
        names |= {n["inputs"]["lora_name"] for n in graph.values() if isinstance(n["inputs"].get("lora_name"), str)}
    return sorted(names)


@pytest.fixture(scope="session")
def loras(host, sd15):
    """Random LoRA files for the test SD1.5 in the host's models/loras, keyed as the host's own loader maps them
    (``build_loras.py``): the test's files, and the shipped templates' names as links to them; removed after."""
    folder = host.models("loras")
    built = host.run_python(
        os.path.join(HERE, "build_loras.py"), host.dir, os.path.join(host.models("checkpoints"), sd15), folder
    )
    assert built.returncode == 0, f"building the LoRAs failed:\n{built.stdout}\n{built.stderr[-4000:]}"
    print(built.stdout.strip())
    linked = []
    for k, name in enumerate(template_lora_names()):
        target = os.path.join(folder, name)
        if not os.path.lexists(target):  # a user's own file of that name is left alone
            os.symlink(os.path.join(folder, TEST_LORAS[k % len(TEST_LORAS)]), target)
            linked.append(target)
    yield TEST_LORAS
    for path in [os.path.join(folder, n) for n in TEST_LORAS + [FOREIGN_LORA]] + linked:
        if os.path.lexists(path):
            os.remove(path)


@pytest.fixture(scope="session")
def installed(host, tiny_models, out_dir) -> dict:
    """The pack copied into custom_nodes, the test checkpoints into models/, and the session's own input folder."""
    names = install_pack(host)
    _copy_folder(tiny_models["encoder"], os.path.join(host.models("masc"), ENCODER_NAME))
    _copy_folder(tiny_models["segmenter"], os.path.join(host.models("clipseg"), SEGMENTER_NAME))
    _copy_folder(tiny_models["sam3"], os.path.join(host.models("sam3"), SAM3_NAME))
    # A user mistake to explain: a CLIPSeg folder put where SigLIP2 checkpoints go.
    _copy_folder(tiny_models["segmenter"], os.path.join(host.models("masc"), NOT_SIGLIP_NAME))
    folders = {kind: os.path.join(out_dir, kind) for kind in ("input", "output", "temp", "user")}
    for folder in folders.values():
        os.makedirs(folder, exist_ok=True)
    # A user's own file under an example's name: it must survive the pack's start-up. Same pixels (a JPEG
    # comment added after the start marker), so the workflows and their thumbnails see the example photo.
    users_file = os.path.join(folders["input"], EXAMPLE_PREFIX + "dog_02.jpg")
    with open(os.path.join(ROOT, "example_inputs", EXAMPLE_PREFIX + "dog_02.jpg"), "rb") as handle:
        photo = handle.read()
    comment = b"a user's own copy"
    with open(users_file, "wb") as handle:
        handle.write(photo[:2] + b"\xff\xfe" + (len(comment) + 2).to_bytes(2, "big") + comment + photo[2:])
    yield {"files": names, "users_file": users_file, **folders}
    shutil.rmtree(os.path.join(host.models("masc"), NOT_SIGLIP_NAME), ignore_errors=True)


def server_args(host: Host, installed: dict, *extra: str) -> list[str]:
    return [
        "--cpu",
        "--disable-all-custom-nodes",
        "--whitelist-custom-nodes",
        host.pack_name,
        "--input-directory",
        installed["input"],
        "--output-directory",
        installed["output"],
        "--temp-directory",
        installed["temp"],
        "--user-directory",
        installed["user"],
        "--database-url",
        "sqlite:///:memory:",
        *extra,
    ]


@pytest.fixture(scope="session")
def server(host, installed, out_dir):
    started = hostapi.start_server(
        host.python, host.dir, server_args(host, installed), os.path.join(out_dir, "server.log")
    )
    yield started
    started.stop()


def pack_mappings():
    """The pack's node ids and display names, read by importing the checkout as ComfyUI does."""
    tests = os.path.join(ROOT, "tests")
    if tests not in sys.path:  # pytest put it there already when it loaded tests/conftest.py
        sys.path.insert(0, tests)
    from comfy_harness import import_pack

    return import_pack(ROOT)


@functools.cache
def metadata_writers() -> frozenset[str]:
    """The pack's node types that add their scores to saved PNGs (they take ComfyUI's hidden extra_pnginfo)."""
    return frozenset(
        name
        for name, cls in pack_mappings().nodes.NODE_CLASS_MAPPINGS.items()
        if "extra_pnginfo" in cls.INPUT_TYPES().get("hidden", {})
    )


def read_scores(*paths: str) -> subprocess.CompletedProcess:
    """``python -m masc_core read`` on PNGs the server saved, run as a user would, by the checkout's interpreter."""
    return subprocess.run(
        [sys.executable, "-m", "masc_core", "read", *paths], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def this_image(printed: str) -> list[tuple[str, str]]:
    """The (``this image:`` line, ``from <node> (node <id>): ...`` line) pairs ``read`` printed for one file (an image
    line's continuation lines, a sweep's cell or several subjects, indented deeper, come between)."""
    lines = printed.splitlines()
    pairs = []
    for k, line in enumerate(lines):
        if not line.startswith("  this image: "):
            continue
        following = next((later for later in lines[k + 1 :] if not later.startswith("      ")), "")
        if following.startswith("    from "):
            pairs.append((line.strip(), following.strip()))
    return pairs


def write_json(path: str, value) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(value, handle, indent=1)
