"""How an evaluation cuts a manifest into work: groups, chunks, fingerprints and shards.

- Rows that share their reference view(s) and masks form a *group*; groups
  are ordered by their first row. The reference is encoded once per group.
  With several subjects per image a group is the rows sharing every
  subject's views.
- A group's rows, in manifest order, are cut into *chunks* of
  ``chunk_size`` rows. A chunk is the unit of work, of resume and of
  determinism: its outputs and prompts are encoded in batches made of that
  chunk only. Batching changes the last bits of a forward pass (padding,
  kernel choice), so this is what makes every score a function of its chunk
  alone: a resumed run, a sharded run and a single run write the same bytes.
- Each row's ``fingerprint`` hashes what its scores depend on: the scoring
  identity (model and options), the row's paths (as written), prompt,
  subject and file sizes, and the same for the rest of its chunk.
- ``--shard i/n`` takes the groups whose position modulo n is i.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import MascInputError
from .manifest import Manifest, ManifestRow


@dataclass
class Chunk:
    rows: list[ManifestRow]
    fingerprints: list[str]
    key: Any = None
    """What the engine that cut it calls it (``plan_rows``' ``chunk_keys``); None for a manifest's plan."""


@dataclass
class Group:
    """Rows that share their reference view(s) and reference mask(s)."""

    ordinal: int
    rows: list[ManifestRow]
    chunks: list[Chunk] = field(default_factory=list)

    @property
    def first(self) -> ManifestRow:
        return self.rows[0]


def digest(*parts) -> str:
    """A short, stable hash of JSON-able parts (key order does not matter)."""
    hasher = hashlib.blake2b(digest_size=16)
    hasher.update(json.dumps(parts, ensure_ascii=False, sort_keys=True, default=str).encode("utf-8"))
    return hasher.hexdigest()


def row_content(row: ManifestRow) -> list:
    """What a row's scores depend on: paths as written (so a moved manifest still resumes), texts, file sizes."""
    sizes = [os.path.getsize(p) for p in (*row.ref_paths, *row.ref_mask_paths, row.out_path)]
    sizes.append(os.path.getsize(row.out_mask_path) if row.out_mask_path else None)
    content = [list(row.ref), list(row.ref_mask), row.out, row.out_mask, row.prompt, row.subject, sizes]
    if row.extra_subjects:  # only then: a single-subject row's fingerprint is what it always was
        more = [os.path.getsize(p) for s in row.extra_subjects for p in (*s.ref_paths, *s.ref_mask_paths)]
        more += [os.path.getsize(s.out_mask_path) if s.out_mask_path else None for s in row.extra_subjects]
        content.append([s.content() for s in row.extra_subjects] + [more])
    return content


def group_key(row: ManifestRow) -> tuple:
    """Rows with the same key share their reference(s): every subject's views, encoded once for them."""
    return (row.ref_paths, row.ref_mask_paths) + tuple((s.ref_paths, s.ref_mask_paths) for s in row.extra_subjects)


def make_chunk(rows: list[ManifestRow], identity_digest: str, key: Any = None) -> Chunk:
    """The rows scored together, with each row's fingerprint (its content, its chunk's and the scoring identity)."""
    contents = [digest(row_content(row)) for row in rows]
    chunk_digest = digest(identity_digest, contents)
    return Chunk(list(rows), [digest(chunk_digest, c) for c in contents], key)


def plan_rows(
    rows: Sequence[ManifestRow], chunk_size: int, identity_digest: str, chunk_keys: Sequence | None = None
) -> list[Group]:
    """Groups (by reference) in order of first row, cut into chunks of ``chunk_size`` rows.

    With ``chunk_keys`` (one per row), a group's rows are cut where the key changes instead: an
    engine that already cut the manifest hands its chunks over this way (see ``batch_scorer``).
    """
    by_key: dict[tuple, Group] = {}
    keys_of: dict[tuple, list] = {}
    for position, row in enumerate(rows):
        key = group_key(row)
        if key not in by_key:
            by_key[key] = Group(ordinal=len(by_key), rows=[])
            keys_of[key] = []
        by_key[key].rows.append(row)
        keys_of[key].append(chunk_keys[position] if chunk_keys is not None else None)
    for key, group in by_key.items():
        if chunk_keys is None:
            for start in range(0, len(group.rows), chunk_size):
                group.chunks.append(make_chunk(group.rows[start : start + chunk_size], identity_digest))
            continue
        start = 0
        for end in range(1, len(group.rows) + 1):
            if end == len(group.rows) or keys_of[key][end] != keys_of[key][start]:
                group.chunks.append(make_chunk(group.rows[start:end], identity_digest, keys_of[key][start]))
                start = end
    return list(by_key.values())


def plan(manifest: Manifest, chunk_size: int, identity_digest: str) -> list[Group]:
    """Groups (by reference) in order of first row, cut into chunks, with each row's fingerprint."""
    return plan_rows(manifest.rows, chunk_size, identity_digest)


def parse_shard(spec: str | None) -> tuple[int, int] | None:
    """'i/n' (0 <= i < n) as (i, n); None stays None."""
    if spec is None:
        return None
    text = str(spec).strip()
    parts = text.split("/")
    try:
        index, count = (int(p) for p in parts) if len(parts) == 2 else (None, None)
    except ValueError:
        index, count = None, None
    if index is None or count is None or count < 1 or not 0 <= index < count:
        raise MascInputError(f"--shard '{spec}' is not i/n with 0 <= i < n (e.g. 0/4 ... 3/4 for four shards)")
    return index, count


def shard_groups(groups: list[Group], shard: tuple[int, int] | None) -> list[Group]:
    """The groups shard i of n scores: those whose position modulo n is i."""
    if shard is None:
        return groups
    index, count = shard
    return [g for g in groups if g.ordinal % count == index]


def manifest_digest(manifest: Manifest) -> str:
    """Identity of a manifest's content (rows, labels, ratings), to check that shards belong together."""
    # same_subject joins only when given, so the digest of a manifest without it is what it always was.
    return digest(
        [
            [row_content(r), r.method, r.seed, r.id, r.ratings]
            + ([r.same_subject] if r.same_subject is not None else [])
            for r in manifest.rows
        ]
    )
