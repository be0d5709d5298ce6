"""Finding, checking and loading SigLIP/SigLIP2 checkpoints (Hugging Face layout).

A checkpoint is a folder with config.json, safetensors weights,
tokenizer.json (+ tokenizer_config.json) and preprocessor_config.json, or a
Hub id that is downloaded to such a folder. Which architecture it is comes
from config.json's ``model_type``, never from its name:

- ``siglip2``: SigLIP2 NaFlex (``Siglip2Model``, variable resolution);
- ``siglip``:  fixed-resolution (``SiglipModel``), which is how SigLIP2's
  fixed-size checkpoints (e.g. siglip2-base-patch16-224) are published.

Only safetensors weights are read and remote code is never run. The model
itself is ``masc_core.siglip`` (transformers' architecture and weight names,
in plain torch).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import warnings
from dataclasses import dataclass

from .errors import MascModelError

PAPER_MODEL_ID = "google/siglip2-so400m-patch16-naflex"
"""The backbone behind the paper's numbers."""

SUPPORTED_MODEL_TYPES = ("siglip2", "siglip")
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
_DOWNLOAD_PATTERNS = ["*.json", "*.safetensors", "tokenizer.model", "merges.txt"]


@dataclass
class CheckpointFolder:
    """A checked Hugging Face checkpoint folder: where it is, what the user called it, its configs and weights."""

    folder: str
    source: str
    config: dict
    preprocessor_config: dict
    weight_files: list[str]

    @property
    def vision_config(self) -> dict:
        return self.config.get("vision_config") or {}

    @property
    def text_config(self) -> dict:
        return self.config.get("text_config") or {}


@dataclass
class CheckpointInfo(CheckpointFolder):
    """What a SigLIP/SigLIP2 checkpoint folder holds, checked before any weight is read."""

    model_type: str = "siglip2"

    @property
    def naflex(self) -> bool:
        """True for SigLIP2 NaFlex (variable resolution) checkpoints."""
        return self.model_type == "siglip2"

    @property
    def text_length(self) -> int:
        """Tokens per prompt: the text tower's trained length (64 for SigLIP2)."""
        return int(self.text_config.get("max_position_embeddings") or 64)


def looks_like_hub_id(name: str) -> bool:
    """'owner/name' that is not an existing local path."""
    return bool(_HUB_ID.match(name)) and not os.path.exists(name)


def read_json(path: str, what: str) -> dict:
    """A JSON object from a checkpoint file, or a one-line MascModelError naming the file."""
    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except ValueError as exc:
        raise MascModelError(f"{what} '{path}' is not valid JSON ({exc}): re-download or re-save the checkpoint") from None
    except OSError as exc:
        raise MascModelError(f"{what} '{path}' could not be read ({exc})") from None
    if not isinstance(value, dict):
        raise MascModelError(f"{what} '{path}' is not a JSON object: re-download or re-save the checkpoint")
    return value


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
    except Exception as exc:  # network, auth (gated models), missing repo
        raise MascModelError(
            f"could not get '{repo_id}' from the Hugging Face Hub ({first_line(exc)}): check the id, log in with "
            "`huggingface-cli login` for gated models, or download the folder and pass its path"
        ) from None


def resolve(
    name_or_path: str | os.PathLike, *, cache_dir: str | None = None, local_dir: str | None = None
) -> tuple[str, str]:
    """(local folder, source name) for a folder path or a Hub id."""
    name = os.fspath(name_or_path)
    if not name or not name.strip():
        raise MascModelError("no model given: pass a checkpoint folder or a Hub id such as " + PAPER_MODEL_ID)
    if os.path.isdir(name):
        return os.path.abspath(name), name
    if os.path.exists(name):
        raise MascModelError(f"model '{name}' is a file: pass the checkpoint's folder (the one holding config.json)")
    if looks_like_hub_id(name):
        return download(name, cache_dir=cache_dir, local_dir=local_dir), name
    raise MascModelError(
        f"model '{name}' does not exist: pass a checkpoint folder (Hugging Face layout) or a Hub id such as {PAPER_MODEL_ID}"
    )


def inspect(folder: str, source: str | None = None) -> CheckpointInfo:
    """Check that ``folder`` is a usable SigLIP/SigLIP2 checkpoint, without loading weights."""
    source = source or folder
    config_path = os.path.join(folder, "config.json")
    if not os.path.isfile(config_path):
        raise MascModelError(
            f"model folder '{source}' has no config.json: it is not a Hugging Face checkpoint folder "
            "(pick the folder that holds config.json and model.safetensors)"
        )
    config = read_json(config_path, "config")
    model_type = str(config.get("model_type") or "")
    if model_type not in SUPPORTED_MODEL_TYPES:
        shown = model_type or "unknown"
        raise MascModelError(
            f"model folder '{source}' holds a '{shown}' model, not SigLIP2: MaSC needs a SigLIP2 checkpoint "
            f"such as {PAPER_MODEL_ID}"
        )
    if not isinstance(config.get("vision_config"), dict) or not isinstance(config.get("text_config"), dict):
        raise MascModelError(
            f"model folder '{source}' has a {model_type} config without both vision_config and text_config: "
            "MaSC needs the full image-text model, not a vision-only or text-only export"
        )
    names = sorted(os.listdir(folder))
    weights = [n for n in names if n.endswith(".safetensors")]
    if not weights:
        others = [n for n in names if n.endswith((".bin", ".pt", ".pth", ".ckpt", ".msgpack", ".h5"))]
        found = f" (found {', '.join(others)})" if others else ""
        raise MascModelError(
            f"model folder '{source}' has no .safetensors weights{found}: only safetensors are loaded; "
            "download the safetensors version of the checkpoint"
        )
    if "tokenizer.json" not in names:
        hint = (
            " (it has spiece.model: a SigLIP v1 tokenizer)" if "spiece.model" in names else ""
        )
        raise MascModelError(
            f"model folder '{source}' has no tokenizer.json{hint}: MaSC needs SigLIP2's Gemma tokenizer.json"
        )
    tokenizer_config_path = os.path.join(folder, "tokenizer_config.json")
    if os.path.isfile(tokenizer_config_path):
        declared = str(read_json(tokenizer_config_path, "tokenizer config").get("tokenizer_class") or "")
        if declared.startswith("SiglipTokenizer"):
            raise MascModelError(
                f"model folder '{source}' is a SigLIP (v1) checkpoint: MaSC is defined on SigLIP2; use e.g. {PAPER_MODEL_ID}"
            )
    preprocessor_path = os.path.join(folder, "preprocessor_config.json")
    preprocessor = read_json(preprocessor_path, "preprocessor config") if os.path.isfile(preprocessor_path) else {}
    if config["vision_config"].get("vision_use_head") is False:
        raise MascModelError(
            f"model folder '{source}' has no attention-pooling head (vision_use_head=false): PF needs SigLIP2's pooler"
        )
    return CheckpointInfo(
        folder=folder,
        source=source,
        model_type=model_type,
        config=config,
        preprocessor_config=preprocessor,
        weight_files=weights,
    )


def first_line(exc: BaseException) -> str:
    """An exception's first line (or its type): third-party errors reach users as one line."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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


def load_pretrained(model_class, folder: str, *, label: str, incomplete_hint: str, unused=lambda key: False, **kwargs):
    """``model_class.from_pretrained(folder)``: local, safetensors only, quietly, with one-line errors.

    A checkpoint that lacks weights is refused (transformers would fill them
    with random values and the results would be silently wrong), except
    buffers rebuilt at init (position_ids) and keys ``unused(key)`` accepts.
    Returns the model in eval mode with gradients off. ``label`` names the
    checkpoint in messages (e.g. "model folder 'x'").
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
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model


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


def load_model(info: CheckpointInfo):
    """The SigLIP/SigLIP2 model of a checked checkpoint (``masc_core.siglip``), float32, CPU, eval mode.

    Built without random initialisation (on the meta device) and given the
    checkpoint's tensors. A checkpoint that lacks weights is refused;
    tensors the model does not use (e.g. buffers older exports saved) are
    ignored.
    """
    import torch

    from .siglip import SiglipModel

    label = f"model folder '{info.source}'"
    try:
        with torch.device("meta"):
            model = SiglipModel(info.config, naflex=info.naflex)
    except (ValueError, TypeError) as exc:
        raise MascModelError(f"{label} has a config this SigLIP2 implementation cannot build: {first_line(exc)}") from None
    tensors = read_safetensors(info.folder, info.weight_files, label)
    expected = model.state_dict().keys()
    missing = sorted(k for k in expected if k not in tensors)
    if missing:
        shown = ", ".join(missing[:3]) + (" ..." if len(missing) > 3 else "")
        raise MascModelError(
            f"{label} lacks {len(missing)} weights ({shown}): the checkpoint is incomplete or not a full SigLIP2 image-text model"
        )
    try:
        model.load_state_dict({k: tensors[k] for k in expected}, assign=True)
    except RuntimeError as exc:  # shapes that do not match config.json
        raise MascModelError(f"{label}: its weights do not match its config.json ({first_line(exc)})") from None
    model = model.float().eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model
