"""BatchScorer without Ray: manifest rows in (as Ray Data hands them over), eval's columns out, the same bits as
eval."""

from __future__ import annotations

import ast
import csv
import json
import math
import os

import numpy as np
import pytest

from conftest import ROOT, call
from eval_manifests import small_rows, write_csv, write_masks
from masc_core.evaluation.batch_scorer import BatchScorer
from masc_core.evaluation.options import EvalOptions

FAST = ["--device", "cpu", "--max-patches", "64", "--chunk-size", "4", "--baselines", "global", "--quiet", "--no-plots"]
SCORER = dict(device="cpu", max_patches=64, chunk_size=4, baselines=("global",))


def columns_of(rows: list[dict], *, with_row: bool = True) -> dict[str, np.ndarray]:
    """CSV rows as Ray Data's numpy batch format gives them: one array per column (numbers typed, empty cells NaN)."""
    batch = {}
    for name in rows[0]:
        values = [row[name] for row in rows]
        if name == "seed" or name.startswith("human_"):
            batch[name] = np.array([float(v) if v != "" else math.nan for v in values])
        else:
            batch[name] = np.array(values, dtype=object)
    if with_row:
        batch["row"] = np.arange(len(rows), dtype=np.int64)
    return batch


@pytest.fixture(scope="module")
def manifest(tmp_path_factory, naflex_dir):
    """A 36-row manifest of the test photos (3 references, ratings, empty and tiny masks) and eval's files for it."""
    folder = tmp_path_factory.mktemp("batch")
    write_masks(str(folder))
    rows = small_rows()
    path = write_csv(str(folder / "manifest.csv"), rows)
    code, _, err = call("eval", path, "--model", naflex_dir, *FAST, "--out-dir", folder / "out")
    assert code == 0, err
    with open(path, newline="", encoding="utf-8") as handle:
        read = list(csv.DictReader(handle))
    with open(folder / "out" / "results.jsonl", encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    return str(folder), read, lines


@pytest.fixture(scope="module")
def scorer(manifest, naflex_dir):
    return BatchScorer(EvalOptions(naflex_dir, **SCORER), base_dir=manifest[0])


def test_a_batch_in_manifest_order_gives_evals_lines(manifest, scorer):
    folder, rows, lines = manifest
    out = scorer.score_batch(columns_of(rows))
    # Rows sharing a reference are contiguous here, so the batch's chunks are eval's: the same bytes.
    assert out["record"].tolist() == lines
    assert out["row"].tolist() == list(range(len(rows)))
    for index, line in enumerate(lines):
        record = json.loads(line)
        for name in ("cp", "pf", "global_cp", "global_pf", "out_foreground", "human_cp", "human_pf"):
            value = out[name][index]
            assert (math.isnan(value) and record[name] is None) or value == record[name], name
        assert out["filtered"][index] == record["filtered"] and out["out_mask"][index] == (record["out_mask"] or "")
        assert out["ref"][index] == "|".join(record["ref"]) and out["fingerprint"][index] == record["fingerprint"]
    assert out["cp"].dtype == np.float64 and out["filtered"].dtype == bool
    assert any(math.isnan(v) for v in out["pf"])  # the rows without an output mask


def test_pandas_batches_and_generator_calls_give_the_same(manifest, scorer):
    pandas = pytest.importorskip("pandas")
    folder, rows, lines = manifest
    frame = pandas.DataFrame(columns_of(rows[:12]))
    parts = list(scorer(frame))  # what Ray Data iterates: one output per chunk
    assert [len(part["record"]) for part in parts] == [4, 4, 4]
    assert [line for part in parts for line in part["record"].tolist()] == lines[:12]


def test_rows_without_a_row_column_and_chunks_cut_by_key(manifest, scorer):
    folder, rows, lines = manifest
    batch = columns_of(rows[:12], with_row=False)
    out = scorer.score_batch(batch)
    assert out["row"].tolist() == [-1] * 12
    assert [json.loads(r)["cp"] for r in out["record"]] == [json.loads(line)["cp"] for line in lines[:12]]
    # Another cut (6 + 6) is another set of chunks: other fingerprints; each score is a function of its chunk.
    batch["chunk"] = np.array([0] * 6 + [1] * 6)
    cut = scorer.score_batch(batch)
    assert len(set(cut["fingerprint"].tolist()) & set(out["fingerprint"].tolist())) == 0
    assert np.allclose(cut["cp"], out["cp"], atol=1e-5, equal_nan=True)


def test_bad_rows_are_one_line_errors(manifest, scorer):
    from masc_core.errors import MascInputError

    folder, rows, _ = manifest
    batch = columns_of(rows[:2])
    batch["out"] = np.array(["missing.png", "missing_too.png"], dtype=object)
    with pytest.raises(MascInputError, match=r"2 files do not exist: line 1, column 'out'.*missing\.png"):
        scorer.score_batch(batch)
    del batch["out"]
    with pytest.raises(MascInputError, match="has no column 'out'"):
        scorer.score_batch(batch)


def test_the_scorer_imports_no_ray():
    path = os.path.join(ROOT, "masc_core", "evaluation", "batch_scorer.py")
    tree = ast.parse(open(path, encoding="utf-8").read())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported and not any(name.split(".")[0] == "ray" for name in imported), imported
