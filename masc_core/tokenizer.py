"""SigLIP2 text tokenization, owned here so scores do not depend on transformers.

SigLIP2 checkpoints ship a Gemma BPE tokenizer (tokenizer.json). What
transformers does with it changed in version 5: its new ``Siglip2Tokenizer``
lowercases the text (SigLIP2 was trained on lowercased text), while 4.x
loaded the plain Gemma tokenizer and kept the case. The paper's package runs
on transformers 5, so this module reproduces transformers 5's behaviour with
the ``tokenizers`` library alone:

- the BPE vocabulary and merges of tokenizer.json, with byte fallback and
  fused unknowns;
- normalizer: lowercase (when transformers 5 would pick ``Siglip2Tokenizer``:
  NaFlex ``siglip2`` checkpoints, or a tokenizer_config naming that class),
  then spaces to "▁";
- special tokens: tokenizer.json's post-processor (SigLIP2: EOS appended);
- truncation and padding to the text tower's trained length (64 tokens for
  SigLIP2), on the side tokenizer_config.json names (SigLIP2: right). The
  text model pools the LAST position, so the padding is part of the
  embedding and must match training.
"""

from __future__ import annotations

import os

import torch

from .checkpoint import read_json
from .errors import MascModelError


def token_text(value, default: str) -> str:
    """A special token from a tokenizer config entry (a string or an AddedToken dict)."""
    if value is None:
        return default
    if isinstance(value, dict):
        return str(value.get("content", default))
    return str(value)


def require_token_id(tokenizer, token: str, role: str) -> int:
    """The id of a special token, or a one-line MascModelError (inconsistent tokenizer files)."""
    token_id = tokenizer.token_to_id(token)
    if token_id is None:
        raise MascModelError(
            f"the tokenizer has no id for its {role} {token!r}: the tokenizer files are inconsistent; re-download the checkpoint"
        )
    return token_id


class SiglipTextTokenizer:
    """Turns prompts into the fixed-length id rows the SigLIP2 text tower expects."""

    def __init__(
        self,
        tokenizer_file: str | os.PathLike,
        tokenizer_config: dict,
        *,
        lowercase: bool,
        max_length: int,
    ):
        from tokenizers import Tokenizer, normalizers, pre_tokenizers

        try:
            tokenizer = Tokenizer.from_file(os.fspath(tokenizer_file))
        except Exception as exc:  # tokenizers raises a bare Exception on bad JSON
            raise MascModelError(f"tokenizer file '{tokenizer_file}' could not be read: {exc}") from None
        model = tokenizer.model
        if type(model).__name__ != "BPE":
            raise MascModelError(
                f"tokenizer file '{tokenizer_file}' holds a {type(model).__name__} model; "
                "SigLIP2 uses a Gemma BPE tokenizer"
            )
        model.byte_fallback = True
        model.fuse_unk = True
        model.dropout = None
        model.ignore_merges = False
        steps = [normalizers.Lowercase()] if lowercase else []
        steps.append(normalizers.Replace(" ", "▁"))
        tokenizer.normalizer = normalizers.Sequence(steps)
        tokenizer.pre_tokenizer = pre_tokenizers.Split(pattern=" ", behavior="merged_with_previous", invert=False)

        # tokenizer.json's post-processor decides the special tokens (SigLIP2:
        # EOS appended); transformers 5 ignores tokenizer_config's
        # add_bos_token/add_eos_token whenever a tokenizer.json exists.
        pad = token_text(tokenizer_config.get("pad_token"), "<pad>")
        pad_id = require_token_id(tokenizer, pad, "pad_token")
        side = str(tokenizer_config.get("padding_side", "left"))
        tokenizer.enable_truncation(max_length=max_length)
        tokenizer.enable_padding(direction=side, pad_id=pad_id, pad_token=pad, length=max_length)
        self._tokenizer = tokenizer
        self.max_length = max_length
        self.lowercase = lowercase

    def __call__(self, texts: list[str]) -> torch.Tensor:
        """Token ids [len(texts), max_length] (int64)."""
        encodings = self._tokenizer.encode_batch(list(texts))
        return torch.tensor([e.ids for e in encodings], dtype=torch.long)

    @classmethod
    def from_folder(cls, folder: str, *, model_type: str, max_length: int) -> "SiglipTextTokenizer":
        """Load the tokenizer of a checkpoint folder (tokenizer.json + tokenizer_config.json)."""
        tokenizer_file = os.path.join(folder, "tokenizer.json")
        config_file = os.path.join(folder, "tokenizer_config.json")
        config = read_json(config_file, "tokenizer config") if os.path.exists(config_file) else {}
        declared = str(config.get("tokenizer_class") or "")
        # transformers 5 loads Siglip2Tokenizer (which lowercases) for every
        # siglip2 checkpoint whatever tokenizer_config says, and for siglip
        # (fixed-size) checkpoints only when the config names that class.
        lowercase = model_type == "siglip2" or declared.startswith("Siglip2Tokenizer")
        return cls(tokenizer_file, config, lowercase=lowercase, max_length=max_length)
