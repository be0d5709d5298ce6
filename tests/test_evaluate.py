"""`eval`, `merge` and `rank` from the command line: results, summary, agreement, resume, shards, errors."""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import statistics

import krippendorff
import numpy as np
import pytest
from scipy import stats

from conftest import PROMPT, call, read_bytes
from eval_manifests import dreambench_rows, small_rows, write_csv, write_jsonl, write_masks
from masc_core import MascEncoder, score_images
from masc_core.evaluation.agreement import fit_mapping, interval_alpha
from masc_core.evaluation import EvalOptions, evaluate
from masc_core.io.images import load_image_file, load_mask_file
from masc_core.selection.ranking import rank
from masc_core.evaluation.summary import SummaryOptions, summarize

FAST = ["--device", "cpu", "--max-patches", "64"]
SMALL = FAST + ["--chunk-size", "4", "--bootstrap", "100", "--baselines", "global", "--quiet"]
OUTPUT_FILES = ("results.jsonl", "results.csv", "summary.json")


def strict_json(text: str):
    def refuse(name):
        raise AssertionError(f"{name} in JSON output")

    return json.loads(text, parse_constant=refuse)


def lines(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read().splitlines()


def records(folder):
    return [strict_json(line) for line in lines(os.path.join(folder, "results.jsonl"))]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    folder = tmp_path_factory.mktemp("eval")
    write_masks(str(folder))
    write_csv(str(folder / "big.csv"), dreambench_rows())
    write_csv(str(folder / "small.csv"), small_rows())
    return folder


@pytest.fixture(scope="module")
def big_run(workspace, naflex_dir):
    """The README's end-to-end run: 300 rows, the same-backbone baselines, human ratings."""
    out_dir = workspace / "big-out"
    code, out, err = call(
        "eval",
        workspace / "big.csv",
        "--model",
        naflex_dir,
        *FAST,
        "--out-dir",
        out_dir,
        "--baselines",
        "global",
        "pf-ablations",
        "--bootstrap",
        "200",
    )
    assert code == 0, err
    return str(out_dir), out, err


@pytest.fixture(scope="module")
def small_run(workspace, naflex_dir):
    out_dir = workspace / "small-out"
    code, _, err = call("eval", workspace / "small.csv", "--model", naflex_dir, *SMALL, "--out-dir", out_dir)
    assert code == 0, err
    return str(out_dir)


# ---------------------------------------------------------------- one run, end to end


def test_end_to_end_files_and_reports(big_run):
    out_dir, out, err = big_run
    rows = records(out_dir)
    assert [r["row"] for r in rows] == list(range(300))
    csv_lines = lines(os.path.join(out_dir, "results.csv"))
    assert len(csv_lines) == 301
    header = csv_lines[0].split(",")
    for name in (
        "cp",
        "pf",
        "global_cp",
        "global_pf",
        "pf_full_stripped",
        "pf_bg_unstripped",
        "pf_fg_unstripped",
        "out_foreground",
        "small_out_mask",
        "filtered",
        "human_cp",
        "human_cp.r1",
        "human_cp.r2",
        "human_pf.r1",
    ):
        assert name in header, name
    import csv as csv_module

    table = list(csv_module.DictReader(io.StringIO("\n".join(csv_lines) + "\n")))
    for record, cells in zip(rows, table):
        assert (float(cells["cp"]) if cells["cp"] else None) == record["cp"]
        assert (float(cells["pf"]) if cells["pf"] else None) == record["pf"]
        assert cells["filtered"] == ("true" if record["filtered"] else "false")
    strict_json(open(os.path.join(out_dir, "summary.json")).read())
    # stdout: the tables; stderr: progress and where time went.
    assert out.splitlines()[0].split()[:3] == ["method", "rows", "kept"]
    assert "agreement with human CP ratings" in out and "agreement with human PF ratings" in out
    assert "human inter-rater alpha" in out
    assert "eval: 300/300 rows (100%)" in err and "images/s" in err
    assert "time: loading" in err and "encoding" in err and "scoring" in err
    timing = strict_json(open(os.path.join(out_dir, "timing.json")).read())
    assert timing["rows_scored"] == 300 and timing["rows_skipped"] == 0 and timing["images_per_second"] > 0
    assert timing["memory"]["peak_rss_mib"] > 50  # this process's peak resident memory, in MiB
    seconds = timing["seconds"]
    assert seconds["loading"] == pytest.approx(seconds["loading_models"] + seconds["loading_files"])
    parts = seconds["loading"] + seconds["encoding"] + seconds["scoring"] + seconds["other"]
    assert parts == pytest.approx(seconds["total"], rel=1e-6) and seconds["encoding"] > 0
    # One forward per reference group, then per chunk (32 rows of a group) one per distinct
    # output (the reference photo itself, when it is an output, is already encoded) and one
    # per distinct text (stripped for PF, as given for the global baselines).
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(row["ref"]), []).append(row)
    chunks = [members[i : i + 32] for members in groups.values() for i in range(0, len(members), 32)]
    assert timing["forwards"] == {
        "siglip_images": len(groups) + sum(len({r["out"] for r in chunk} - set(chunk[0]["ref"])) for chunk in chunks),
        "siglip_texts": sum(
            len({r["encoded_prompt"] for r in chunk} | {r["prompt"] for r in chunk}) for chunk in chunks
        ),
    }
    assert timing["forwards"]["siglip_images"] < 300 / 2


def test_scores_equal_direct_scoring(big_run, naflex_dir):
    rows = records(big_run[0])
    encoder = MascEncoder.load(naflex_dir, device="cpu", max_num_patches=64)
    picked = [
        next(r for r in rows if r["out_mask"] == "masks/tiny.png"),
        next(r for r in rows if r["out_mask"] is None),
    ]
    picked += [rows[0], rows[-1]]
    folder = os.path.dirname(big_run[0])
    for row in picked:
        mask = load_mask_file(os.path.join(folder, row["out_mask"])) if row["out_mask"] else None
        expected = score_images(
            encoder,
            load_image_file(row["out"]),
            reference=[load_image_file(p) for p in row["ref"]],
            reference_mask=[load_mask_file(os.path.join(folder, p)) for p in row["ref_mask"]],
            mask=mask,
            prompt=row["prompt"],
            subject=row["subject"],
        ).scores[0]
        assert row["cp"] == pytest.approx(expected.cp, abs=1e-5)
        if expected.pf is None:
            assert row["pf"] is None and row["pf_undefined"] == expected.pf_undefined
        else:
            assert row["pf"] == pytest.approx(expected.pf, abs=1e-5)
        assert row["encoded_prompt"] == expected.encoded_prompt
        assert row["out_foreground"] == expected.foreground_fraction


def test_filter_and_means_come_from_the_rows(big_run):
    out_dir = big_run[0]
    rows = records(out_dir)
    summary = strict_json(open(os.path.join(out_dir, "summary.json")).read())
    tiny = [r for r in rows if r["out_mask"] == "masks/tiny.png"]
    assert tiny and all(r["small_out_mask"] and r["filtered"] and r["out_foreground"] < 0.05 for r in tiny)
    assert summary["filter"]["dropped"] == len(tiny) == summary["filter"]["small_out_mask"]
    assert summary["filter"]["small_ref_mask"] == 0
    for method, block in summary["methods"].items():
        mine = [r for r in rows if r["method"] == method and not r["filtered"]]
        assert block["kept"] == len(mine)
        for name, stats_block in block["metrics"].items():
            defined = [r for r in mine if r[name] is not None]
            assert stats_block["n"] == len(defined)
            assert stats_block["mean"] == math.fsum(r[name] for r in defined) / len(defined)
            per_seed = {}
            for seed in sorted({r["seed"] for r in defined}):
                values = [r[name] for r in defined if r["seed"] == seed]
                per_seed[str(seed)] = math.fsum(values) / len(values)
            assert stats_block["seed_means"] == per_seed
            assert stats_block["std_over_seeds"] == pytest.approx(statistics.stdev(per_seed.values()), rel=1e-12)
    # The summary is a function of the rows (and options) alone.
    options = SummaryOptions.from_dict(summary["options"])
    assert summarize(rows, options) == summary


def test_agreement_matches_the_libraries(big_run):
    out_dir = big_run[0]
    rows = records(out_dir)
    block = strict_json(open(os.path.join(out_dir, "summary.json")).read())["agreement"]["cp"]
    names = ["cp", "global_cp"]
    assert list(block["metrics"]) == names and block["headline"] == "cp"
    units = [
        r for r in rows if r["human_cp"] is not None and not r["filtered"] and all(r[m] is not None for m in names)
    ]
    assert block["n"] == len(units) and block["excluded"]["filtered"] == sum(1 for r in rows if r["filtered"])
    human = np.array([r["human_cp"] for r in units])
    for name in names:
        metric = np.array([r[name] for r in units])
        mapping = fit_mapping(metric, (0.0, 4.0))
        assert block["mapping"][name] == {
            "kind": "minmax",
            "scale": [0.0, 4.0],
            "metric_min": metric.min(),
            "metric_max": metric.max(),
        }
        result = block["metrics"][name]
        assert result["krippendorff_alpha"] == pytest.approx(
            interval_alpha(np.stack([human, mapping.apply(metric)])), abs=1e-12
        )
        assert result["spearman"] == pytest.approx(stats.spearmanr(metric, human).statistic, abs=1e-12)
        # Per method, the package itself on the same numbers (small enough for it).
        method = "dreambooth"
        mine = [i for i, r in enumerate(units) if r["method"] == method]
        expected = krippendorff.alpha(
            np.stack([human[mine], mapping.apply(metric[mine])]), level_of_measurement="interval"
        )
        assert block["by_method"][method]["metrics"][name]["krippendorff_alpha"] == pytest.approx(expected, abs=1e-10)
        # Per rater: r2 rated only some rows.
        rated = [i for i, r in enumerate(units) if "r2" in r["ratings"]["cp"]]
        r2 = np.array([units[i]["ratings"]["cp"]["r2"] for i in rated])
        assert block["by_rater"]["r2"]["n"] == len(rated) < len(units)
        assert block["by_rater"]["r2"]["metrics"][name]["spearman"] == pytest.approx(
            stats.spearmanr(metric[rated], r2).statistic, abs=1e-12
        )
    assert block["krippendorff_alpha"] == block["metrics"]["cp"]["krippendorff_alpha"]
    assert block["ci95"] == block["metrics"]["cp"]["ci95"]
    table = np.array([[r["ratings"]["cp"].get(k, np.nan) for r in units] for k in ("r1", "r2")])
    assert block["inter_rater"]["krippendorff_alpha"] == pytest.approx(
        krippendorff.alpha(table, level_of_measurement="interval"), abs=1e-12
    )
    pf = strict_json(open(os.path.join(out_dir, "summary.json")).read())["agreement"]["pf"]
    assert list(pf["metrics"]) == ["pf", "global_pf", "pf_full_stripped", "pf_bg_unstripped", "pf_fg_unstripped"]
    assert pf["excluded"]["undefined_metric"] == sum(
        1 for r in rows if r["human_pf"] is not None and not r["filtered"] and r["pf"] is None
    )
    assert "by_rater" in pf and "inter_rater" not in pf  # one PF rater


# ---------------------------------------------------------------- resume


def test_rerun_with_nothing_to_do_loads_no_model(small_run, workspace, naflex_dir, tmp_path):
    copy = shutil.copytree(small_run, tmp_path / "again")
    code, _, err = call("eval", workspace / "small.csv", "--model", naflex_dir, *SMALL, "--out-dir", copy)
    assert code == 0, err
    timing = json.load(open(copy / "timing.json"))
    assert timing["rows_scored"] == 0 and timing["rows_skipped"] == 36 and timing["seconds"]["loading_models"] == 0
    for name in OUTPUT_FILES:
        assert read_bytes(copy, name) == read_bytes(small_run, name)


def test_resume_after_lost_rows_and_a_partial_line(small_run, workspace, naflex_dir, tmp_path):
    copy = shutil.copytree(small_run, tmp_path / "resume")
    kept = [line for i, line in enumerate(lines(copy / "results.jsonl")) if i not in (5, 17)]
    with open(copy / "results.jsonl", "w") as handle:
        handle.write("\n".join(kept) + "\n" + kept[0][:40])  # a run killed mid-write
    code, _, err = call("eval", workspace / "small.csv", "--model", naflex_dir, *SMALL, "--out-dir", copy)
    assert code == 0, err
    # Rows 5 and 17 sit in two chunks of 4 (groups of 12 rows); only those are scored again.
    assert json.load(open(copy / "timing.json"))["rows_scored"] == 8
    for name in OUTPUT_FILES:
        assert read_bytes(copy, name) == read_bytes(small_run, name), name


def test_resume_after_a_crash_inside_a_utf8_character(small_run, workspace, naflex_dir, tmp_path):
    """The torn tail ends half-way through a two-byte character: the reader must not decode it before the repair."""
    copy = shutil.copytree(small_run, tmp_path / "torn-utf8")
    kept = lines(copy / "results.jsonl")[:-1]
    with open(copy / "results.jsonl", "wb") as handle:
        handle.write(("\n".join(kept) + "\n").encode("utf-8") + '{"row": 35, "prompt": "café'.encode("utf-8")[:-1])
    code, _, err = call("eval", workspace / "small.csv", "--model", naflex_dir, *SMALL, "--out-dir", copy)
    assert code == 0, err
    assert json.load(open(copy / "timing.json"))["rows_scored"] == 4  # the last chunk of 4, nothing else
    for name in OUTPUT_FILES:
        assert read_bytes(copy, name) == read_bytes(small_run, name), name


def test_interrupted_run_resumes_to_the_same_files(small_run, workspace, naflex_dir, tmp_path):
    options = EvalOptions(
        model=naflex_dir,
        device="cpu",
        max_patches=64,
        chunk_size=4,
        baselines=("global",),
        summary=SummaryOptions(bootstrap=100),
    )
    out_dir = str(tmp_path / "interrupted")

    def stop_after_two_chunks(done, total, scored, elapsed):
        if scored >= 8:
            raise KeyboardInterrupt

    os.makedirs(out_dir)
    shutil.copy(os.path.join(small_run, "summary.json"), out_dir)  # an older summary
    with pytest.raises(KeyboardInterrupt):
        evaluate(str(workspace / "small.csv"), out_dir, options, progress=stop_after_two_chunks)
    assert len(lines(os.path.join(out_dir, "results.jsonl"))) == 8
    # A summary that does not match the rows is never left behind.
    assert not os.path.exists(os.path.join(out_dir, "summary.json"))
    report = evaluate(str(workspace / "small.csv"), out_dir, options)
    assert (report.rows_scored, report.rows_skipped) == (28, 8)
    for name in OUTPUT_FILES:
        assert read_bytes(out_dir, name) == read_bytes(small_run, name), name


def test_changed_rows_are_rescored_and_labels_refresh_for_free(small_run, workspace, naflex_dir, tmp_path):
    copy = shutil.copytree(small_run, tmp_path / "changed")
    given = small_rows()
    given[20]["prompt"] = "a cat wearing a hat"
    manifest = write_csv(str(workspace / "changed.csv"), given)
    code, _, err = call("eval", manifest, "--model", naflex_dir, *SMALL, "--out-dir", copy)
    assert code == 0, err
    assert json.load(open(copy / "timing.json"))["rows_scored"] == 4  # row 20's chunk
    before, after = records(small_run), records(copy)
    assert after[20]["encoded_prompt"] == "wearing a hat" and after[20]["pf"] != before[20]["pf"]
    assert after[20]["cp"] == before[20]["cp"]
    assert [r for r in after if r["row"] not in range(20, 24)] == [r for r in before if r["row"] not in range(20, 24)]
    # Labels and ratings are not inputs of the scores: refreshed without scoring.
    given[3]["method"] = "renamed"
    given[3]["human_cp.r1"] = 0
    manifest = write_csv(str(workspace / "relabelled.csv"), given)
    code, _, err = call("eval", manifest, "--model", naflex_dir, *SMALL, "--out-dir", copy)
    assert code == 0, err
    assert json.load(open(copy / "timing.json"))["rows_scored"] == 0
    row = records(copy)[3]
    assert row["method"] == "renamed" and row["ratings"]["cp"]["r1"] == 0.0
    assert "renamed" in json.load(open(copy / "summary.json"))["methods"]
    # So is the filter threshold: flags are recomputed from the stored mask fractions.
    assert any(r["filtered"] for r in records(copy))
    code, _, err = call("eval", manifest, "--model", naflex_dir, *SMALL, "--out-dir", copy, "--min-foreground", "0")
    assert code == 0, err
    assert json.load(open(copy / "timing.json"))["rows_scored"] == 0
    assert not any(r["filtered"] for r in records(copy))
    assert json.load(open(copy / "summary.json"))["filter"]["dropped"] == 0


def test_manifest_without_ratings_has_no_agreement(workspace, naflex_dir, tmp_path):
    given = [{k: v for k, v in r.items() if not k.startswith("human_")} for r in small_rows()[:6]]
    manifest = write_csv(str(workspace / "unrated.csv"), given)
    code, out, err = call(
        "eval",
        manifest,
        "--model",
        naflex_dir,
        *FAST,
        "--chunk-size",
        "4",
        "--quiet",
        "--out-dir",
        tmp_path / "out",
        "--json",
    )
    assert code == 0, err
    summary = strict_json(out)
    assert "agreement" not in summary and summary["rows"] == 6 and summary["metrics"] == ["cp", "pf"]
    assert summary == json.load(open(tmp_path / "out" / "summary.json"))
    # Without baselines only PF's stripped prompts are encoded: one per distinct text per chunk.
    rows = records(tmp_path / "out")
    chunks = [rows[0:4], rows[4:6]]  # one reference group of 6 rows, chunks of 4
    assert json.load(open(tmp_path / "out" / "timing.json"))["forwards"]["siglip_texts"] == sum(
        len({r["encoded_prompt"] for r in chunk}) for chunk in chunks
    )


def test_fresh_discards_earlier_results(small_run, workspace, naflex_dir, tmp_path):
    copy = shutil.copytree(small_run, tmp_path / "fresh")
    code, _, err = call("eval", workspace / "small.csv", "--model", naflex_dir, *SMALL, "--out-dir", copy, "--fresh")
    assert code == 0, err
    assert json.load(open(copy / "timing.json"))["rows_scored"] == 36
    for name in OUTPUT_FILES:
        assert read_bytes(copy, name) == read_bytes(small_run, name), name


# ---------------------------------------------------------------- shards


def test_three_shards_merge_to_exactly_one_run(small_run, workspace, naflex_dir, tmp_path):
    out_dir = tmp_path / "sharded"
    seen = set()
    for index in range(3):
        code, out, err = call(
            "eval",
            workspace / "small.csv",
            "--model",
            naflex_dir,
            *SMALL,
            "--out-dir",
            out_dir,
            "--shard",
            f"{index}/3",
        )
        assert code == 0 and out == "", err
        shard = out_dir / f"shard-{index}-of-3"
        assert not (shard / "summary.json").exists()
        rows = {r["row"] for r in records(shard)}
        assert rows and not rows & seen  # whole reference groups, disjoint
        seen |= rows
    assert seen == set(range(36))
    code, out, err = call("merge", out_dir)
    assert code == 0, err
    assert "agreement with human CP ratings" in out
    assert err.startswith("merged 3 shards, 36 rows; the shards together scored 36 rows in ")
    shard_peaks = [
        json.load(open(out_dir / f"shard-{i}-of-3" / "timing.json"))["memory"]["peak_rss_mib"] for i in range(3)
    ]
    assert json.load(open(out_dir / "timing.json"))["memory"]["peak_rss_mib"] == max(shard_peaks)
    assert "GiB resident (the largest shard)" in err
    for name in OUTPUT_FILES:
        assert read_bytes(out_dir, name) == read_bytes(small_run, name), name


def test_merge_refuses_incomplete_or_mixed_shards(workspace, naflex_dir, tmp_path):
    out_dir = tmp_path / "partial"
    for index in (0, 1):
        code, _, err = call(
            "eval",
            workspace / "small.csv",
            "--model",
            naflex_dir,
            *SMALL,
            "--out-dir",
            out_dir,
            "--shard",
            f"{index}/3",
        )
        assert code == 0, err
    code, out, err = call("merge", out_dir)
    assert code == 2 and out == "" and err == "error: cannot merge: shard 2/3 is missing\n"
    run_file = out_dir / "shard-1-of-3" / "run.json"
    run = json.load(open(run_file))
    json.dump(dict(run, complete=False), open(run_file, "w"))
    code, _, err = call("merge", out_dir)
    assert code == 2 and "did not finish: rerun its eval command" in err
    json.dump(dict(run, summary_options=dict(run["summary_options"], seed=9)), open(run_file, "w"))
    code, _, err = call("merge", out_dir)
    assert code == 2 and "was run with other summary options" in err
    code, _, err = call("merge", tmp_path / "nothing-here")
    assert code == 2 and "no shard folders to merge" in err


def test_csv_and_jsonl_manifests_give_the_same_files(small_run, workspace, naflex_dir, tmp_path):
    manifest = write_jsonl(str(workspace / "small.jsonl"), small_rows())
    out_dir = tmp_path / "from-jsonl"
    code, _, err = call("eval", manifest, "--model", naflex_dir, *SMALL, "--out-dir", out_dir)
    assert code == 0, err
    for name in OUTPUT_FILES:
        assert read_bytes(out_dir, name) == read_bytes(small_run, name), name


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "case,expected",
    [
        ("missing_column", "has no column 'prompt'"),
        ("missing_file", "line 3, column 'out': file"),
        ("bad_shard", "--shard '3/3' is not i/n with 0 <= i < n"),
        ("rating_out_of_scale", "line 2, column 'human_cp.r1': rating 7 is outside the rating scale 0..4"),
        ("clip_not_a_folder", "--clip '"),
        ("dino_is_siglip", "holds a 'siglip2' model: expected vit or dinov2"),
        ("not_an_image", "manifest line 3, column 'out' '"),
    ],
)
def test_bad_input_exits_2_with_one_line(case, expected, workspace, naflex_dir, tmp_path):
    given = small_rows()[:4]
    extra = []
    if case == "missing_column":
        given = [{k: v for k, v in r.items() if k != "prompt"} for r in given]
    elif case == "missing_file":
        given[1]["out"] = "generated/nope.png"
    elif case == "bad_shard":
        extra = ["--shard", "3/3"]
    elif case == "rating_out_of_scale":
        given[0]["human_cp.r1"] = 7
    elif case == "clip_not_a_folder":
        extra = ["--clip", str(tmp_path / "nope")]
    elif case == "dino_is_siglip":
        extra = ["--dino", naflex_dir]
    elif case == "not_an_image":
        (tmp_path / "notes.png").write_text("not an image")
        given[1]["out"] = str(tmp_path / "notes.png")
    manifest = write_csv(str(workspace / f"{case}.csv"), given)
    code, out, err = call("eval", manifest, "--model", naflex_dir, *SMALL, "--out-dir", tmp_path / "out", *extra)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and expected in err, err
    if case == "not_an_image":
        assert "is not an image PIL can read" in err


# ---------------------------------------------------------------- rank


def test_rank_orders_with_the_ranking_module(files, naflex_dir):
    outs = ["dog_01", "cat_00", "dog_02", "teapot_00"]
    argv = [
        "rank",
        "--model",
        naflex_dir,
        *FAST,
        "--ref",
        files["dog_00"],
        "--ref-mask",
        files["dog_00_mask"],
        "--out",
        *[files[o] for o in outs],
        "--out-mask",
        *[files[o + "_mask"] for o in outs],
        "--prompt",
        PROMPT,
        "--subject",
        "dog",
    ]
    code, out, err = call(*argv, "--by", "cp", "--top", "2", "--json")
    assert code == 0, err
    document = strict_json(out)
    encoder = MascEncoder.load(naflex_dir, device="cpu", max_num_patches=64)
    batch = score_images(
        encoder,
        [load_image_file(files[o]) for o in outs],
        reference=load_image_file(files["dog_00"]),
        reference_mask=load_mask_file(files["dog_00_mask"]),
        mask=[load_mask_file(files[o + "_mask"]) for o in outs],
        prompt=PROMPT,
        subject="dog",
    )
    expected = rank(batch.scores, by="cp", top_k=2)
    assert [e["index"] for e in document["ranking"]] == expected.order
    assert document["selected"] == [files[outs[i]] for i in expected.selected] and len(document["selected"]) == 2
    assert [e["rank"] for e in document["ranking"]] == [1, 2, 3, 4]
    code, out, err = call(*argv, "--by", "both", "--min-pf", "2")  # PF is a cosine: nobody passes
    assert code == 0, err
    table = out.splitlines()
    assert table[0].split()[:4] == ["rank", "image", "CP", "PF"] and len(table) == 1 + 4 + 2
    assert all("PF below 2" in line for line in table[1:5]) and "nothing selected" in out
    with pytest.raises(SystemExit) as exit_info:
        call(*argv, "--top", "0")
    assert exit_info.value.code == 2
