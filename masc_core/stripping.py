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
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from .errors import MascInputError

_WHITESPACE = re.compile(r"\s+")


def collapse_whitespace(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def parse_subject_names(subject: str | Iterable[str] | None) -> list[str]:
    """Subject names from a string ("sks dog, dog": comma-separated) or an iterable of names.

    Empty entries are dropped; duplicates (ignoring case) are kept once.
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
    return names


def _strip_one(prompt: str, name: str) -> str:
    literal = re.escape(name)
    # Whole-word on both sides, whatever the name's first and last characters are.
    bare = rf"(?<!\w){literal}(?!\w)"
    with_article = rf"\b(?:a|an|the)\s+{literal}(?!\w)"
    for pattern in (with_article, bare):
        if re.search(pattern, prompt, flags=re.IGNORECASE):
            return re.sub(pattern, "", prompt, flags=re.IGNORECASE)
    return prompt


def strip_subject(prompt: str, subject: str | Iterable[str] | None) -> str:
    """The prompt without the subject's name(s), whitespace collapsed (the text PF encodes).

    With no subject name the prompt is returned unchanged, as the paper's
    package does.
    """
    names = parse_subject_names(subject)
    if not names:
        return prompt
    for name in sorted(names, key=len, reverse=True):
        prompt = _strip_one(prompt, collapse_whitespace(name))
    return collapse_whitespace(prompt)


def subject_found(prompt: str, stripped: str) -> bool:
    """Whether stripping removed anything (whitespace differences aside)."""
    return prompt.split() != stripped.split()


def subject_prompts(subject: Any, name: str = "subject") -> list[str]:
    """The text prompts for CLIPSeg: the subject's name(s), "sks dog, dog" or a list of names."""
    if not isinstance(subject, (str, list, tuple)):
        raise MascInputError(
            f"{name} is a {type(subject).__name__}: give the subject's name as text, e.g. 'dog' (several: 'sks dog, dog')"
        )
    names = parse_subject_names(subject)
    if not names:
        raise MascInputError(
            f"{name} is empty: give the subject's name as CLIPSeg's text prompt, e.g. 'dog' (several: 'sks dog, dog')"
        )
    return names
