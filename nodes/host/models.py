"""ComfyUI's folders as the pack uses them: the model folders and checkpoint lookup, the example inputs, the output
folder.

A name from a shared workflow resolves only to a folder the loader's list shows (``checkpoint_folder``); outside
ComfyUI the same calls use ``$MASC_MODELS_DIR`` and ``$MASC_OUTPUT_DIR`` (else ./models and ./output).
"""

from __future__ import annotations

import logging
import os
import re
import shutil

from ...masc_core.errors import MascInputError
from ...masc_core.safe_text import shown
from .comfy import IN_COMFYUI, folder_paths

MODEL_FOLDERS = {
    "masc": "SigLIP2 checkpoints for MaSC",
    "clipseg": "CLIPSeg checkpoints for MaSC Auto Mask",
    "sam3": "SAM3 checkpoints (transformers folders) for MaSC Auto Mask",
}


def _standalone_models_dir() -> str:
    """Outside ComfyUI: $MASC_MODELS_DIR, else ./models."""
    return os.environ.get("MASC_MODELS_DIR", os.path.join(os.getcwd(), "models"))


def register_model_folders() -> None:
    """Add models/masc, models/clipseg and models/sam3 to ComfyUI's model folders.

    ``add_model_folder_path`` keeps the paths a user's extra_model_paths.yaml
    already gave these keys (assigning folder_names_and_paths would wipe them).
    """
    if not IN_COMFYUI:
        return
    for key in MODEL_FOLDERS:
        folder_paths.add_model_folder_path(key, os.path.join(folder_paths.models_dir, key))


PACK_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE_INPUTS = os.path.join(PACK_DIR, "example_inputs")
EXAMPLE_PREFIX = "masc_example_"
"""The example workflows load their inputs from ComfyUI's input folder under these names.

Not a subfolder: Load Image lists the input folder's top level only, and
front end 1.49 marks a workflow naming a file outside that list as having
missing media ("Resolve them before running"), although the server would
load it. ComfyUI itself puts its example.png there.
"""
EXAMPLE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")


def copy_example_inputs(input_dir: str | None = None) -> list[str]:
    """Copy the pack's example images into ComfyUI's input folder; the names copied.

    A file is copied only when that name is absent, so a user's own file is
    never overwritten (and an example the user edited stays edited). Runs at
    every start, so examples added by a pack update arrive too. Never raises:
    a read-only input folder only means the examples must be copied by hand.
    """
    if input_dir is None:
        if not IN_COMFYUI:
            return []
        input_dir = folder_paths.get_input_directory()
    copied = []
    try:
        for name in sorted(os.listdir(EXAMPLE_INPUTS)):
            destination = os.path.join(input_dir, name)
            if (
                not name.startswith(EXAMPLE_PREFIX)
                or not name.lower().endswith(EXAMPLE_SUFFIXES)
                or os.path.lexists(destination)
            ):
                continue
            os.makedirs(input_dir, exist_ok=True)
            shutil.copyfile(os.path.join(EXAMPLE_INPUTS, name), destination)
            copied.append(name)
    except OSError as error:
        logging.warning(
            "MaSC: example inputs not copied to %s (%s); copy them from %s by hand", input_dir, error, EXAMPLE_INPUTS
        )
    return copied


def model_roots(kind: str) -> list[str]:
    """Folders searched for checkpoints of ``kind`` ("masc", "clipseg" or "sam3")."""
    if IN_COMFYUI:
        try:
            return list(folder_paths.get_folder_paths(kind))
        except KeyError:
            return [os.path.join(folder_paths.models_dir, kind)]
    return [os.path.join(_standalone_models_dir(), kind)]


def list_checkpoints(kind: str) -> list[str]:
    """Checkpoint folders (holding config.json) under the model roots, as names relative to a root.

    One or two levels deep, so both models/masc/<name> and
    models/masc/<owner>/<name> work.
    """
    found: list[str] = []
    for root in model_roots(kind):
        if not os.path.isdir(root):
            continue
        for entry in sorted(os.listdir(root)):
            path = os.path.join(root, entry)
            if not os.path.isdir(path) or entry.startswith("."):
                continue
            if os.path.isfile(os.path.join(path, "config.json")):
                found.append(entry)
                continue
            for sub in sorted(os.listdir(path)):
                if os.path.isfile(os.path.join(path, sub, "config.json")):
                    found.append(f"{entry}/{sub}")
    return list(dict.fromkeys(found))


def checkpoint_choices(kind: str, hub_id: str) -> list[str]:
    """A loader's model combo: local checkpoint folders, then the Hub id (unless a local folder has that name)."""
    local = list_checkpoints(kind)
    return local + ([hub_id] if hub_id not in local else [])


def find_checkpoint(kind: str, name: str) -> str | None:
    """The folder of a checkpoint the loader's list shows (``list_checkpoints``), or None.

    Only listed names resolve, and only inside the model roots: a name from a shared workflow that is an
    absolute path, climbs out with '..' or names any other folder is never opened as a model.
    """
    if name not in list_checkpoints(kind):
        return None
    for root in model_roots(kind):
        path = os.path.join(root, name)
        if os.path.isfile(os.path.join(path, "config.json")):
            return path
    return None


def download_folder(kind: str, repo_id: str) -> str:
    """Where a Hub checkpoint is downloaded: models/<kind>/<owner>--<name>."""
    return os.path.join(model_roots(kind)[0], repo_id.replace("/", "--"))


def hub_folder_names(repo_id: str) -> list[str]:
    """The names a Hub checkpoint's folder has in models/<kind>, in the order they are looked for: README's
    (<name>: models/masc/siglip2-so400m-patch16-naflex), the Hub's own (<owner>/<name>) and a download's
    (<owner>--<name>)."""
    return [repo_id.split("/")[-1], repo_id, repo_id.replace("/", "--")]


def local_hub_folder(kind: str, repo_id: str) -> str | None:
    """The folder of ``repo_id`` already in a models/<kind> root under any of its names (``hub_folder_names``), or
    None: a loader set to a Hub id uses it and never touches the network."""
    for root in model_roots(kind):
        for name in hub_folder_names(repo_id):
            path = os.path.join(root, name)
            if os.path.isfile(os.path.join(path, "config.json")):
                return path
    return None


def checkpoint_folder(kind: str, name: str, hub_id: str) -> tuple[str | None, str | None]:
    """(local folder, None) for a listed checkpoint, (None, download folder) for the pack's own Hub id.

    Anything else (a path, another Hub id, a folder removed since the list was drawn) is refused with the same
    line whether or not such a path exists on the server, so an error never tells a workflow what is there.
    Only ``hub_id`` ever downloads: another 'owner/name' would fetch any size into models/ for every user.
    """
    folder = find_checkpoint(kind, name)
    if folder is not None:
        return folder, None
    if name == hub_id:
        local = local_hub_folder(kind, name)  # copied in by hand (README's name) or fetched before: no network
        if local is not None:
            return local, None
        return None, download_folder(kind, name)
    raise MascInputError(
        f"model {shown(name)} is not a checkpoint folder in models/{kind}: choose one the list shows, or put the "
        f"checkpoint's folder (with config.json) in models/{kind} and refresh; only {hub_id} is downloaded by name"
    )


def output_directory() -> str:
    """ComfyUI's output folder (outside ComfyUI: $MASC_OUTPUT_DIR, else ./output)."""
    if IN_COMFYUI:
        return folder_paths.get_output_directory()
    return os.environ.get("MASC_OUTPUT_DIR", os.path.join(os.getcwd(), "output"))


_ABSOLUTE_PATH = re.compile(r"(?<![\w.~/])(?:[A-Za-z]:)?(?:[/\\][^/\\\s'\"]+){2,}[/\\]?")
"""Any absolute path left in a message (two or more components), POSIX or Windows."""


def server_places() -> list[tuple[str, str]]:
    """(absolute folder, what a message calls it): the model folders as models/<kind>, then ComfyUI's own folders."""
    places = [(root, f"models/{kind}") for kind in MODEL_FOLDERS for root in model_roots(kind)]
    if IN_COMFYUI:
        places += [
            (folder_paths.models_dir, "models"),
            (folder_paths.get_input_directory(), "input"),
            (folder_paths.get_output_directory(), "output"),
            (folder_paths.get_temp_directory(), "temp"),
            (folder_paths.base_path, "ComfyUI"),
        ]
    else:
        places += [(_standalone_models_dir(), "models"), (output_directory(), "output")]
    places.append((PACK_DIR, "the pack's folder"))
    return places


def without_server_paths(message: str) -> str:
    """``message`` with every server folder named as a workflow sees it: models/sam3/<name>, input/..., output/...

    A refusal reaches the browser and whoever the workflow is shared with; the server's layout (user names, mount
    points) is none of theirs. Known folders get their ComfyUI names; any other absolute path keeps only its last part.
    """
    known = []
    for folder, name in server_places():
        for form in {os.path.abspath(folder), os.path.realpath(folder)}:
            known.append((form.rstrip(os.sep), name))
    for folder, name in sorted(known, key=lambda item: len(item[0]), reverse=True):
        if folder and len(folder) > 1:
            message = message.replace(folder + os.sep, name + "/").replace(folder, name)
    return _ABSOLUTE_PATH.sub(lambda match: ".../" + re.split(r"[/\\]", match.group(0).rstrip("/\\"))[-1], message)
