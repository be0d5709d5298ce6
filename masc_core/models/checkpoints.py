"""Hugging Face checkpoint folders: finding, downloading, checking and reading them.

One home for what every model this package loads (SigLIP2, CLIPSeg, the
CLIP and DINO baselines) has in common:

- ``resolve``: a folder path, a Hugging Face cache folder
  (``models--owner--name``) or a Hub id (downloaded once) -> a local folder;
- ``read_folder``: config.json read, its ``model_type`` accepted (never the
  folder's name), safetensors weights present, preprocessor_config.json
  read, all checked before any weight is read, with one-line errors;
- ``read_safetensors`` / ``load_pretrained``: weights, safetensors only,
  never remote code, a checkpoint that lacks weights refused;
- ``folder_digest``: the identity of a folder's content, for resumable
  evaluations and for the metadata saved with scored images.

What is particular to one model (SigLIP2's tokenizer and pooling head,
CLIPSeg's decoder layers) is checked in that model's own module.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import warnings
from dataclasses import dataclass, field

from ..errors import MascModelError, first_line
from ..io.files import check_regular_file, read_json
from .weight_shapes import Size, WeightShapes, check_sizes, read_weight_shapes

PAPER_MODEL_ID = "google/siglip2-so400m-patch16-naflex"
"""The backbone behind the paper's numbers."""

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
_DOWNLOAD_PATTERNS = ["*.json", "*.safetensors", "tokenizer.model", "merges.txt"]
_OTHER_WEIGHT_FORMATS = (".bin", ".pt", ".pth", ".ckpt", ".msgpack", ".h5")


@dataclass
class CheckpointFolder:
    """A checked Hugging Face checkpoint folder: where it is, what the user called it, its configs and weights."""

    folder: str
    source: str
    config: dict
    preprocessor_config: dict
    weight_files: list[str]
    model_type: str = ""
    label: str = "model folder"
    """How messages name this kind of folder ("SAM3 model folder"); ``named`` adds the source."""
    _weights: WeightShapes | None = field(default=None, repr=False, compare=False)

    @property
    def named(self) -> str:
        """The folder as messages name it: its label and the name the user gave it."""
        return f"{self.label} '{self.source}'"

    def weight_shapes(self) -> WeightShapes:
        """The shapes in the weights' safetensors headers (read once, tensors never read)."""
        if self._weights is None:
            self._weights = read_weight_shapes(self.folder, self.weight_files, self.named)
        return self._weights

    def check_sizes(self, sizes: list[Size]) -> None:
        """Every size the config asks held against the weights before any module is built (``weight_shapes``)."""
        check_sizes(self.named, self.weight_shapes(), sizes)

    @property
    def vision_config(self) -> dict:
        return self.config.get("vision_config") or {}

    @property
    def text_config(self) -> dict:
        return self.config.get("text_config") or {}


def transformers_config(info: CheckpointFolder, class_name: str):
    """config.json as transformers' ``class_name`` reads it (its defaults filled): no module is built."""
    try:
        import transformers

        return getattr(transformers, class_name).from_dict(dict(info.config))
    except Exception as exc:  # a config transformers' own class refuses
        raise MascModelError(
            f"{info.named}: config.json cannot be read as a {class_name} ({first_line(exc)}): re-download the "
            "checkpoint"
        ) from None


def read_config(path: str, what: str) -> dict:
    """A checkpoint's JSON file, or a one-line MascModelError that says to re-download it."""
    return read_json(path, what, error=MascModelError, hint="re-download or re-save the checkpoint")


# ---------------------------------------------------------------- where the folder is


def looks_like_hub_id(name: str) -> bool:
    """'owner/name' that is not an existing local path."""
    return bool(_HUB_ID.match(name)) and not os.path.exists(name)


def download(repo_id: str, *, cache_dir: str | None = None, local_dir: str | None = None) -> str:
    """Download (or reuse the cached copy of) a Hub checkpoint; return its folder.

    ``local_dir`` puts the files in that folder (e.g. ComfyUI's models/masc)
    instead of the Hugging Face cache.
    """
    try:
        from huggingface_hub import snapshot_download
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        raise MascModelError(f"cannot download '{repo_id}': huggingface_hub is not installed") from None
    try:
        return snapshot_download(
            repo_id=repo_id, allow_patterns=_DOWNLOAD_PATTERNS, cache_dir=cache_dir, local_dir=local_dir
        )
    except Exception as exc:  # network, a missing repository
        # With local_dir (ComfyUI's models/<kind>/owner--name), the folder a person makes by hand is its sibling named
        # as the repository (models/masc/siglip2-so400m-patch16-naflex), which the loader finds under that id.
        if local_dir:
            folder = os.path.join(os.path.dirname(local_dir), repo_id.split("/")[-1])
            elsewhere = (
                f"create the folder {folder} holding the files of https://huggingface.co/{repo_id} (config.json, "
                "the .safetensors weights, the tokenizer and preprocessor files) and run again"
            )
        else:
            elsewhere = "download the folder on another machine and pass its path"
        raise MascModelError(
            f"could not get '{repo_id}' from the Hugging Face Hub ({first_line(exc)}): check the id and the network, "
            f"or {elsewhere}"
        ) from None


def snapshot_folder(folder: str) -> str:
    """The checkpoint inside a Hugging Face cache folder (models--owner--name), else ``folder``.

    Other ComfyUI packs download models with ``cache_dir=models/<kind>``,
    which leaves that layout; pointing at it should just work.
    """
    if os.path.isfile(os.path.join(folder, "config.json")):
        return folder
    snapshots = os.path.join(folder, "snapshots")
    if not os.path.isdir(snapshots):
        return folder
    ref = os.path.join(folder, "refs", "main")
    if os.path.isfile(ref):
        with open(ref, encoding="utf-8") as handle:
            pinned = os.path.join(snapshots, handle.read().strip())
        if os.path.isfile(os.path.join(pinned, "config.json")):
            return pinned
    candidates = [os.path.join(snapshots, n) for n in os.listdir(snapshots)]
    candidates = [c for c in candidates if os.path.isfile(os.path.join(c, "config.json"))]
    return max(candidates, key=os.path.getmtime) if candidates else folder


def resolve(
    name_or_path: str | os.PathLike | None,
    *,
    what: str = "model",
    example: str = PAPER_MODEL_ID,
    cache_dir: str | None = None,
    local_dir: str | None = None,
) -> tuple[str, str]:
    """(local folder, source name) for a folder path or a Hub id; ``what`` and ``example`` word the errors."""
    name = os.fspath(name_or_path) if name_or_path is not None else ""
    if not name.strip():
        raise MascModelError(f"no {what} given: pass a checkpoint folder or a Hub id such as {example}")
    if os.path.isdir(name):
        return snapshot_folder(os.path.abspath(name)), name
    if os.path.exists(name):
        raise MascModelError(f"{what} '{name}' is a file: pass the checkpoint's folder (the one holding config.json)")
    if looks_like_hub_id(name):
        return snapshot_folder(download(name, cache_dir=cache_dir, local_dir=local_dir)), name
    raise MascModelError(
        f"{what} '{name}' does not exist: pass a checkpoint folder (Hugging Face layout) or a Hub id such as {example}"
    )


# ---------------------------------------------------------------- what the folder holds


def read_folder(
    folder: str,
    source: str | None,
    *,
    label: str,
    model_types: tuple[str, ...],
    wrong_type: str,
    preprocessor_required: bool,
    cls: type[CheckpointFolder] = CheckpointFolder,
) -> CheckpointFolder:
    """Check the parts every checkpoint folder has, without reading weights; return them as ``cls``.

    ``label`` names the folder in messages ("model folder", "--clip");
    ``wrong_type`` follows "holds a '<type>' model" when config.json's
    ``model_type`` is not one of ``model_types``.
    """
    source = source or folder
    if not os.path.isdir(folder):
        raise MascModelError(f"{label} '{source}' is not a folder: pass a checkpoint folder in Hugging Face layout")
    names = sorted(os.listdir(folder))
    for name in names:  # a pipe or a device named model.safetensors would block or never end the read
        check_regular_file(
            os.path.join(folder, name),
            f"{label} '{source}': the file",
            shown_as=name,
            error=MascModelError,
            hint="put the checkpoint's own file there",
        )
    config_path = os.path.join(folder, "config.json")
    if not os.path.isfile(config_path):
        raise MascModelError(
            f"{label} '{source}' has no config.json: it is not a Hugging Face checkpoint folder "
            "(pick the folder that holds config.json and model.safetensors)"
        )
    config = read_config(config_path, "config")
    model_type = str(config.get("model_type") or "")
    if model_type not in model_types:
        raise MascModelError(f"{label} '{source}' holds a '{model_type or 'unknown'}' model{wrong_type}")
    weights = [n for n in names if n.endswith(".safetensors")]
    if not weights:
        others = [n for n in names if n.endswith(_OTHER_WEIGHT_FORMATS)]
        found = f" (found {', '.join(others)})" if others else ""
        raise MascModelError(
            f"{label} '{source}' has no .safetensors weights{found}: only safetensors are loaded; "
            "download the safetensors version of the checkpoint"
        )
    preprocessor_path = os.path.join(folder, "preprocessor_config.json")
    if os.path.isfile(preprocessor_path):
        preprocessor = read_config(preprocessor_path, "preprocessor config")
    elif preprocessor_required:
        raise MascModelError(
            f"{label} '{source}' has no preprocessor_config.json: copy the one that came with the checkpoint "
            "(it gives the input size and normalization)"
        )
    else:
        preprocessor = {}
    return cls(
        folder=folder,
        source=source,
        config=config,
        preprocessor_config=preprocessor,
        weight_files=weights,
        model_type=model_type,
        label=label,
    )


def folder_digest(folder: str, sample_bytes: int = 0) -> str:
    """Identity of a checkpoint folder: its small JSON files' bytes and every file's name and size.

    Cheap (weights are not read) and stable across copies of the folder.
    With ``sample_bytes``, also that many bytes from the start, the middle
    and the end of each .safetensors file: still cheap (three short reads
    per file, never the 1.6 GB), and it tells apart checkpoints whose
    configs and file sizes agree but whose weights differ (fine-tunes,
    random-weight builds), as the metadata saved with scored images needs.
    """
    parts = []
    for name in sorted(os.listdir(folder)):
        full = os.path.join(folder, name)
        if not os.path.isfile(full):
            continue
        if name in ("config.json", "preprocessor_config.json", "tokenizer_config.json"):
            with open(full, "rb") as handle:
                parts.append([name, hashlib.blake2b(handle.read(), digest_size=16).hexdigest()])
        else:
            parts.append([name, os.path.getsize(full)])
            if sample_bytes > 0 and name.endswith(".safetensors"):
                parts[-1].append(_sampled_bytes_digest(full, sample_bytes))
    hasher = hashlib.blake2b(digest_size=16)
    hasher.update(json.dumps([parts], ensure_ascii=False, sort_keys=True, default=str).encode("utf-8"))
    return hasher.hexdigest()


def _sampled_bytes_digest(path: str, count: int) -> str:
    size = os.path.getsize(path)
    hasher = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as handle:
        for start in sorted({0, max(0, size // 2 - count // 2), max(0, size - count)}):
            handle.seek(start)
            hasher.update(handle.read(count))
    return hasher.hexdigest()


# ---------------------------------------------------------------- weights


@contextlib.contextmanager
def quiet_transformers():
    """Silence transformers' loading progress bar and advice, restoring them afterwards."""
    import transformers

    logging = transformers.utils.logging
    verbosity = logging.get_verbosity()
    bars = logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()


def frozen(model):
    """``model`` in eval mode with gradients off (every loaded model is frozen)."""
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model


def load_pretrained(model_class, folder: str, *, label: str, incomplete_hint: str, unused=lambda key: False, **kwargs):
    """``model_class.from_pretrained(folder)``: local, safetensors only, quietly, with one-line errors.

    A checkpoint that lacks weights is refused (transformers would fill them
    with random values and the results would be silently wrong), except
    buffers rebuilt at init (position_ids) and keys ``unused(key)`` accepts.
    Returns the model frozen. ``label`` names the checkpoint in messages
    (e.g. "model folder 'x'").
    """
    try:
        with quiet_transformers():
            model, loading = model_class.from_pretrained(
                folder, local_files_only=True, use_safetensors=True, output_loading_info=True, **kwargs
            )
    except Exception as exc:
        raise MascModelError(f"{label} could not be loaded: {first_line(exc)}") from None
    missing = [k for k in loading.get("missing_keys", []) if not k.endswith("position_ids") and not unused(k)]
    if missing:
        shown = ", ".join(sorted(missing)[:3]) + (" ..." if len(missing) > 3 else "")
        raise MascModelError(f"{label} lacks {len(missing)} weights ({shown}): {incomplete_hint}")
    return frozen(model)


def read_safetensors(folder: str, files: list[str], label: str) -> dict:
    """All tensors of a checkpoint's safetensors files (sharded or not), as CPU tensors."""
    from safetensors.torch import load_file

    tensors: dict = {}
    for name in files:
        try:
            tensors.update(load_file(os.path.join(folder, name)))
        except Exception as exc:  # a truncated or corrupted file
            raise MascModelError(f"{label}: '{name}' could not be read ({first_line(exc)}): re-download it") from None
    return tensors
