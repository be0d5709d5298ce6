"""CLIP text tokenization for CLIPSeg, owned here so masks do not depend on transformers.

CLIPSeg checkpoints ship OpenAI CLIP's byte-level BPE (tokenizer.json, or
vocab.json + merges.txt). transformers 5's ``CLIPTokenizer`` reads only the
vocabulary and merges from those files and rebuilds the rest of the pipeline
itself; this module does the same with the ``tokenizers`` library alone, so
the ids are transformers 5's whatever pipeline a tokenizer.json declares:

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

from .checkpoint import read_json
from .errors import MascModelError
from .tokenizer import require_token_id, token_text

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
        model = read_json(tokenizer_file, "tokenizer file").get("model") or {}
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
            "copy the tokenizer files that came with the CLIPSeg checkpoint into it"
        )
    vocab = read_json(vocab_file, "vocabulary")
    try:
        with open(merges_file, encoding="utf-8") as handle:
            lines = handle.read().split("\n")
    except OSError as exc:
        raise MascModelError(f"'{merges_file}' could not be read ({exc}): re-download the checkpoint") from None
    merges = [line for line in lines if line.strip() and not line.startswith("#version")]
    return vocab, merges


class ClipTextTokenizer:
    """Turns prompts into CLIP token ids and an attention mask, padded to the longest prompt."""

    def __init__(self, vocab: dict[str, int], merges: list, tokenizer_config: dict, *, max_length: int):
        special = {role: token_text(tokenizer_config.get(role), default) for role, default in DEFAULT_SPECIAL_TOKENS.items()}
        tokenizer = build_clip_tokenizer(vocab, merges, special)
        pad_id = require_token_id(tokenizer, special["pad_token"], "pad_token")
        tokenizer.enable_truncation(max_length=max_length)
        tokenizer.enable_padding(direction="right", pad_id=pad_id, pad_token=special["pad_token"])
        self._tokenizer = tokenizer
        self.max_length = max_length

    def __call__(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """(input_ids, attention_mask), both [len(texts), longest] int64."""
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = torch.tensor([e.ids for e in encodings], dtype=torch.long)
        mask = torch.tensor([e.attention_mask for e in encodings], dtype=torch.long)
        return ids, mask

    @classmethod
    def from_folder(cls, folder: str, *, max_length: int) -> "ClipTextTokenizer":
        """Load the tokenizer of a CLIPSeg checkpoint folder."""
        vocab, merges = read_vocab_and_merges(folder)
        config_file = os.path.join(folder, "tokenizer_config.json")
        config = read_json(config_file, "tokenizer config") if os.path.isfile(config_file) else {}
        return cls(vocab, merges, config, max_length=max_length)
