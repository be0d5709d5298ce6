"""Text tokenizers owned here, so scores and masks do not depend on the installed transformers.

Two tokenizers, each reproducing what transformers 5 does with a
checkpoint's files, built with the ``tokenizers`` library alone:

**SigLIP2** (``SiglipTextTokenizer``). SigLIP2 checkpoints ship a Gemma BPE tokenizer (tokenizer.json). What
transformers does with it changed in version 5: its new ``Siglip2Tokenizer``
lowercases the text (SigLIP2 was trained on lowercased text), while 4.x
loaded the plain Gemma tokenizer and kept the case. The paper's package runs
on transformers 5, so this tokenizer reproduces transformers 5's behaviour:

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

**CLIP**, for CLIPSeg (``ClipTextTokenizer``). CLIPSeg checkpoints ship OpenAI CLIP's byte-level BPE (tokenizer.json, or
vocab.json + merges.txt). transformers 5's ``CLIPTokenizer`` reads only the
vocabulary and merges from those files and rebuilds the rest of the pipeline
itself; this tokenizer does the same, so the ids are transformers 5's whatever pipeline a tokenizer.json declares:

- normalizer: NFC, runs of whitespace to one space, lowercase;
- pre-tokenizer: CLIP's split (contractions, letter runs, single digits,
  punctuation runs; whitespace dropped), then byte-level characters;
- model: BPE with "</w>" marking the end of a word, unknowns as
  <|endoftext|>;
- special tokens: <|startoftext|> first, <|endoftext|> last;
- truncation to the text tower's length (77 for CLIP, <|endoftext|> kept);
  padding to the longest prompt of the batch with the pad token, and an
  attention mask. The text tower is causal and pools at <|endoftext|>, so
  the padding never changes a prompt's embedding.
"""

from __future__ import annotations

import os

import torch

from ..errors import MascModelError
from .checkpoints import read_config


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
            f"the tokenizer has no id for its {role} {token!r}: the tokenizer files are inconsistent; re-download the "
            "checkpoint"
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
        config = read_config(config_file, "tokenizer config") if os.path.exists(config_file) else {}
        declared = str(config.get("tokenizer_class") or "")
        # transformers 5 loads Siglip2Tokenizer (which lowercases) for every
        # siglip2 checkpoint whatever tokenizer_config says, and for siglip
        # (fixed-size) checkpoints only when the config names that class.
        lowercase = model_type == "siglip2" or declared.startswith("Siglip2Tokenizer")
        return cls(tokenizer_file, config, lowercase=lowercase, max_length=max_length)


# ---------------------------------------------------------------- CLIP

CLIP_SPLIT_PATTERN = r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""
"""CLIP's pre-tokenization regex (transformers 5's CLIPTokenizer)."""

END_OF_WORD = "</w>"
DEFAULT_SPECIAL_TOKENS = {
    "bos_token": "<|startoftext|>",
    "eos_token": "<|endoftext|>",
    "pad_token": "<|endoftext|>",
    "unk_token": "<|endoftext|>",
}


def build_clip_tokenizer(vocab: dict[str, int], merges: list, special_tokens: dict[str, str] | None = None):
    """A ``tokenizers.Tokenizer`` with CLIP's pipeline around the given BPE vocabulary and merges.

    ``special_tokens`` maps bos_token/eos_token/pad_token/unk_token to their
    text (default: CLIP's). Padding and truncation are not set here.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import BPE

    tokens = dict(DEFAULT_SPECIAL_TOKENS, **(special_tokens or {}))
    pairs = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges]
    tokenizer = Tokenizer(
        BPE(
            vocab=dict(vocab),
            merges=pairs,
            dropout=None,
            continuing_subword_prefix="",
            end_of_word_suffix=END_OF_WORD,
            fuse_unk=False,
            unk_token=tokens["unk_token"],
        )
    )
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Lowercase()]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(CLIP_SPLIT_PATTERN), behavior="removed", invert=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    specials = list(dict.fromkeys(tokens[k] for k in ("bos_token", "eos_token", "pad_token", "unk_token")))
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    tokenizer.post_processor = processors.RobertaProcessing(
        (tokens["eos_token"], require_token_id(tokenizer, tokens["eos_token"], "eos_token")),
        (tokens["bos_token"], require_token_id(tokenizer, tokens["bos_token"], "bos_token")),
        trim_offsets=False,
        add_prefix_space=False,
    )
    return tokenizer


def read_vocab_and_merges(folder: str) -> tuple[dict[str, int], list]:
    """The BPE vocabulary and merges of a checkpoint folder: tokenizer.json, else vocab.json + merges.txt."""
    tokenizer_file = os.path.join(folder, "tokenizer.json")
    if os.path.isfile(tokenizer_file):
        model = read_config(tokenizer_file, "tokenizer file").get("model") or {}
        if model.get("type") not in (None, "BPE") or not isinstance(model.get("vocab"), dict):
            raise MascModelError(
                f"tokenizer file '{tokenizer_file}' holds a {model.get('type') or 'unknown'} model, "
                "not CLIP's byte-level BPE: use the tokenizer files that came with the CLIPSeg checkpoint"
            )
        return model["vocab"], list(model.get("merges") or [])
    vocab_file, merges_file = os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt")
    if not (os.path.isfile(vocab_file) and os.path.isfile(merges_file)):
        raise MascModelError(
            f"model folder '{folder}' has no tokenizer.json (nor vocab.json + merges.txt): "
            "copy the tokenizer files that came with the checkpoint into it"
        )
    vocab = read_config(vocab_file, "vocabulary")
    try:
        with open(merges_file, encoding="utf-8") as handle:
            lines = handle.read().split("\n")
    except OSError as exc:
        raise MascModelError(f"'{merges_file}' could not be read ({exc}): re-download the checkpoint") from None
    merges = [line for line in lines if line.strip() and not line.startswith("#version")]
    return vocab, merges


class ClipTextTokenizer:
    """Turns prompts into CLIP token ids and an attention mask, padded to the longest prompt (or to
    ``max_length`` with ``pad_to_max_length``, as SAM3's processor pads its 32 tokens)."""

    def __init__(
        self,
        vocab: dict[str, int],
        merges: list,
        tokenizer_config: dict,
        *,
        max_length: int,
        pad_to_max_length: bool = False,
    ):
        special = {
            role: token_text(tokenizer_config.get(role), default) for role, default in DEFAULT_SPECIAL_TOKENS.items()
        }
        tokenizer = build_clip_tokenizer(vocab, merges, special)
        pad_id = require_token_id(tokenizer, special["pad_token"], "pad_token")
        tokenizer.enable_truncation(max_length=max_length)
        tokenizer.enable_padding(
            direction="right",
            pad_id=pad_id,
            pad_token=special["pad_token"],
            length=max_length if pad_to_max_length else None,
        )
        self._tokenizer = tokenizer
        self.max_length = max_length

    def __call__(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """(input_ids, attention_mask), both [len(texts), longest] int64."""
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = torch.tensor([e.ids for e in encodings], dtype=torch.long)
        mask = torch.tensor([e.attention_mask for e in encodings], dtype=torch.long)
        return ids, mask

    @classmethod
    def from_folder(cls, folder: str, *, max_length: int, pad_to_max_length: bool = False) -> "ClipTextTokenizer":
        """Load the tokenizer of a CLIPSeg or SAM3 checkpoint folder."""
        vocab, merges = read_vocab_and_merges(folder)
        config_file = os.path.join(folder, "tokenizer_config.json")
        config = read_config(config_file, "tokenizer config") if os.path.isfile(config_file) else {}
        return cls(vocab, merges, config, max_length=max_length, pad_to_max_length=pad_to_max_length)
