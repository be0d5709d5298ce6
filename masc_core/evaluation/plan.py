"""How an evaluation cuts a manifest into work: groups, chunks, fingerprints and shards.

- Rows that share their reference view(s) and masks form a *group*; groups
  are ordered by their first row. The reference is encoded once per group.
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

from ..errors import MascInputError
from .manifest import Manifest, ManifestRow


@dataclass
class Chunk:
    rows: list[ManifestRow]
    fingerprints: list[str]


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
    return [list(row.ref), list(row.ref_mask), row.out, row.out_mask, row.prompt, row.subject, sizes]


def plan(manifest: Manifest, chunk_size: int, identity_digest: str) -> list[Group]:
    """Groups (by reference) in order of first row, cut into chunks, with each row's fingerprint."""
    by_key: dict[tuple, Group] = {}
    for row in manifest.rows:
        key = (row.ref_paths, row.ref_mask_paths)
        if key not in by_key:
            by_key[key] = Group(ordinal=len(by_key), rows=[])
        by_key[key].rows.append(row)
    groups = list(by_key.values())
    for group in groups:
        contents = [digest(row_content(row)) for row in group.rows]
        for start in range(0, len(group.rows), chunk_size):
            rows = group.rows[start : start + chunk_size]
            chunk_digest = digest(identity_digest, contents[start : start + chunk_size])
            group.chunks.append(Chunk(rows, [digest(chunk_digest, c) for c in contents[start : start + chunk_size]]))
    return groups


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
    return digest([
        [row_content(r), r.method, r.seed, r.id, r.ratings] + ([r.same_subject] if r.same_subject is not None else [])
        for r in manifest.rows
    ])
