"""A manifest row's further subjects (several subjects in one generated image): columns ``subject_2``, ``ref_2``, ...

A row's first subject is given by the single-subject columns (``subject``, ``ref``, ``ref_mask``,
``out_mask``), so a single-subject manifest is the K = 1 case and reads as it always did. Subject k
(2 <= k <= 8) adds:

- ``subject_k``: its name(s), comma-separated ("sks cat, cat"), stripped from the prompt with the others';
- ``ref_k`` and ``ref_mask_k``: its reference view(s) and one mask per view ('|'-separated in CSV, a list
  in JSONL);
- ``out_mask_k``: its mask in the output, optional, but for every subject of the row or for none
  (``masc_core.metric.subjects.every_or_none``: exclusivity needs every region).

Subjects are numbered without gaps (``subject_3`` needs ``subject_2``); an all-empty set of cells means
the row has no such subject (a CSV mixing single- and multi-subject rows leaves them empty). No name may
belong to two subjects of a row. Files are checked like the first subject's, and the messages name the
line and the column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import MascInputError
from ..metric.stripping import parse_subject_names
from ..metric.subjects import MAX_SUBJECTS
from .manifest_cells import PATH_SEPARATOR, _check_file, _fail, _paths, _resolve, _text

STEMS = ("subject", "ref", "ref_mask", "out_mask")
_NUMBERED = re.compile(r"^(subject|ref|ref_mask|out_mask)_(\d+)$")


@dataclass(frozen=True)
class RowSubject:
    """Subject k >= 2 of a manifest row, as written and resolved against the manifest's folder."""

    subject: str
    ref: tuple[str, ...]
    ref_mask: tuple[str, ...]
    out_mask: str | None
    ref_paths: tuple[str, ...] = ()
    ref_mask_paths: tuple[str, ...] = ()
    out_mask_path: str | None = None

    def content(self) -> list:
        """What this subject contributes to its row's scores (``plan.row_content``), paths as written."""
        return [self.subject, list(self.ref), list(self.ref_mask), self.out_mask]


def column(stem: str, k: int) -> str:
    """The manifest column of subject ``k``'s ``stem``: the single-subject column for k = 1, ``<stem>_<k>`` after."""
    return stem if k == 1 else f"{stem}_{k}"


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip()) or (isinstance(value, list) and not value)


def _numbers(path: str, line: int, record: dict) -> list[int]:
    """The further subjects this row gives (k >= 2 with any non-empty cell), checked to run 2, 3, ... without gaps."""
    found = set()
    for key, value in record.items():
        match = _NUMBERED.match(str(key))
        if match and not _blank(value):
            found.add(int(match.group(2)))
    numbers = sorted(found)
    if not numbers:
        return []
    if numbers[0] < 2:
        raise _fail(
            path,
            f"line {line}, column 'subject_{numbers[0]}'",
            "subjects after the first are numbered from 2 (subject_2, ref_2, ...)",
        )
    if numbers[-1] > MAX_SUBJECTS:
        raise _fail(
            path,
            f"line {line}, column 'subject_{numbers[-1]}'",
            f"at most {MAX_SUBJECTS} subjects per image are supported",
        )
    gaps = [k for k in range(2, numbers[-1] + 1) if k not in found]
    if gaps:
        raise _fail(
            path,
            f"line {line}",
            f"gives subject {numbers[-1]} but not subject {gaps[0]}: number the subjects 2, 3, ... without gaps",
        )
    return numbers


def further_subjects(
    path: str,
    folder: str,
    line: int,
    record: dict,
    missing: dict[str, str],
    first_subject: str,
    first_out_mask: str | None,
) -> tuple[RowSubject, ...]:
    """Subjects 2..K of one manifest row, read and checked (files noted in ``missing`` as the first subject's are)."""
    subjects = []
    for k in _numbers(path, line, record):
        where = f"line {line}, column '{column('subject', k)}'"
        names = _text(path, line, column("subject", k), record.get(column("subject", k)), required=False)
        if not names or not parse_subject_names(names):
            raise _fail(path, where, f"is empty: give subject {k}'s name (its other columns are filled)")
        refs = _paths(path, line, column("ref", k), record.get(column("ref", k)))
        ref_masks = _paths(path, line, column("ref_mask", k), record.get(column("ref_mask", k)))
        if len(ref_masks) != len(refs):
            raise _fail(
                path,
                f"line {line}, column '{column('ref_mask', k)}'",
                f"{len(ref_masks)} masks for {len(refs)} reference views: give one mask per view, separated by "
                f"'{PATH_SEPARATOR}'",
            )
        out_mask = _text(path, line, column("out_mask", k), record.get(column("out_mask", k)), required=False)
        subject = RowSubject(
            subject=names,
            ref=refs,
            ref_mask=ref_masks,
            out_mask=out_mask,
            ref_paths=tuple(_resolve(folder, p) for p in refs),
            ref_mask_paths=tuple(_resolve(folder, p) for p in ref_masks),
            out_mask_path=_resolve(folder, out_mask) if out_mask else None,
        )
        for stem, written, resolved in (
            ("ref", refs, subject.ref_paths),
            ("ref_mask", ref_masks, subject.ref_mask_paths),
            ("out_mask", (out_mask,) if out_mask else (), (subject.out_mask_path,) if out_mask else ()),
        ):
            for name, full in zip(written, resolved):
                _check_file(path=path, line=line, column=column(stem, k), name=name, resolved=full, missing=missing)
        subjects.append(subject)
    if subjects:
        _check_row(path, line, first_subject, first_out_mask, subjects)
    return tuple(subjects)


def _check_row(
    path: str, line: int, first_subject: str, first_out_mask: str | None, subjects: list[RowSubject]
) -> None:
    """Every subject named, no name shared, output masks for all or none."""
    if not parse_subject_names(first_subject):
        raise _fail(
            path,
            f"line {line}, column 'subject'",
            "is empty: with several subjects each needs its name (PF strips them all)",
        )
    owner: dict[str, int] = {}
    for k, names in enumerate([first_subject] + [s.subject for s in subjects], start=1):
        for name in parse_subject_names(names):
            other = owner.setdefault(name.lower(), k)
            if other != k:
                raise _fail(
                    path,
                    f"line {line}, column '{column('subject', k)}'",
                    f"the name '{name}' is also subject {other}'s: each name must belong to one subject",
                )
    masks = [first_out_mask] + [s.out_mask for s in subjects]
    given = [m is not None for m in masks]
    if any(given) and not all(given):
        k = given.index(False) + 1
        raise _fail(
            path,
            f"line {line}, column '{column('out_mask', k)}'",
            "is empty while another subject of the row has its output mask: give every subject's out_mask, or none",
        )


def all_names_of(row) -> list[str]:
    """Every subject's names of a manifest row, in subject order (what PF strips)."""
    names = parse_subject_names(row.subject)
    for subject in row.extra_subjects:
        names += parse_subject_names(subject.subject)
    return names


__all__ = ["STEMS", "RowSubject", "all_names_of", "column", "further_subjects", "MascInputError"]
