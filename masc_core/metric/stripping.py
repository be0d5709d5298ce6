"""Removing the subject's name from the prompt before PF encodes it (paper Sec. 3.3).

The subject is the same in every prompt of a personalization run, so keeping
its name would make PF partly measure the subject instead of the scene.
The paper's rule, for one name, case-insensitively:

1. if "a <name>", "an <name>" or "the <name>" occurs, remove every such
   occurrence;
2. otherwise remove every bare "<name>";
3. collapse runs of whitespace and trim.

A name is matched literally (regex metacharacters have no special meaning)
and only as a whole word. For names that begin and end with a letter or
digit this is exactly the paper's ``\\b<name>\\b``; a name that begins or
ends with another character ("c++") is also matched, where ``\\b`` never
would.

Several names (e.g. "sks dog" and "dog") are removed longest first, so the
full name goes before its parts.

A subject takes at most ``MAX_NAMES`` names (its name and a few synonyms):
each name is one pass over the prompt, so a pasted list of thousands would
hold the worker for seconds per image where Cancel is not checked.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Iterable

from ..errors import MascInputError

_WHITESPACE = re.compile(r"\s+")

MAX_NAMES = 32
"""Names one subject may have ("sks dog, dog, puppy, ..."); more is refused in one line."""
MAX_NAMES_IN_PROMPT = 256
"""Names stripped from one prompt when several subjects' names are given as a list (8 subjects of 32)."""


def collapse_whitespace(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def parse_subject_names(
    subject: str | Iterable[str] | None, *, limit: int = MAX_NAMES, what: str = "subject"
) -> list[str]:
    """Subject names from a string ("sks dog, dog": comma-separated) or an iterable of names.

    Empty entries are dropped; duplicates (ignoring case) are kept once. More than ``limit`` names is one
    MascInputError line naming ``what`` (the input or file entry they came from).
    """
    if subject is None:
        return []
    parts = subject.split(",") if isinstance(subject, str) else list(subject)
    names: list[str] = []
    seen: set[str] = set()
    for part in parts:
        name = collapse_whitespace(str(part))
        if name and name.lower() not in seen:
            seen.add(name.lower())
            names.append(name)
    if len(names) > limit:
        raise MascInputError(
            f"{what} lists {len(names):,} names: a subject takes at most {limit} (its name and a few others, "
            "comma-separated)"
        )
    return names


@functools.lru_cache(maxsize=1024)
def _name_patterns(name: str) -> tuple[re.Pattern, re.Pattern]:
    """The paper's two patterns for ``name``, compiled once: with an article first, then bare."""
    literal = re.escape(name)
    # Whole-word on both sides, whatever the name's first and last characters are.
    with_article = re.compile(rf"\b(?:a|an|the)\s+{literal}(?!\w)", flags=re.IGNORECASE)
    bare = re.compile(rf"(?<!\w){literal}(?!\w)", flags=re.IGNORECASE)
    return with_article, bare


def _strip_one(prompt: str, name: str) -> str:
    for pattern in _name_patterns(name):
        if pattern.search(prompt):
            return pattern.sub("", prompt)
    return prompt


def strip_subject(prompt: str, subject: str | Iterable[str] | None) -> str:
    """The prompt without the subject's name(s), whitespace collapsed (the text PF encodes).

    With no subject name the prompt is returned unchanged, as the paper's
    package does.
    """
    names = parse_subject_names(subject, limit=MAX_NAMES if isinstance(subject, str) else MAX_NAMES_IN_PROMPT)
    if not names:
        return prompt
    for name in sorted(names, key=len, reverse=True):
        prompt = _strip_one(prompt, collapse_whitespace(name))
    return collapse_whitespace(prompt)


def strip_each(prompts: Iterable[str], subjects: Iterable[str | Iterable[str] | None]) -> list[str]:
    """``strip_subject`` of each prompt with its subject, computed once per distinct pair (a batch shares one)."""
    done: dict[tuple, str] = {}
    stripped = []
    for prompt, subject in zip(prompts, subjects):
        key = (prompt, subject if subject is None or isinstance(subject, str) else tuple(subject))
        if key not in done:
            done[key] = strip_subject(prompt, subject)
        stripped.append(done[key])
    return stripped


def subject_found(prompt: str, stripped: str) -> bool:
    """Whether stripping removed anything (whitespace differences aside)."""
    return prompt.split() != stripped.split()


def subject_prompts(subject: Any, name: str = "subject") -> list[str]:
    """The text prompts for a segmenter (CLIPSeg, SAM3): the subject's name(s), "sks dog, dog" or a list of names."""
    if not isinstance(subject, (str, list, tuple)):
        raise MascInputError(
            f"{name} is a {type(subject).__name__}: give the subject's name as text, e.g. 'dog' (several: 'sks dog, "
            "dog')"
        )
    names = parse_subject_names(subject, what=name)
    if not names:
        raise MascInputError(
            f"{name} is empty: give the subject's name as the segmenter's text prompt, e.g. 'dog' (several: 'sks dog, "
            "dog')"
        )
    return names
