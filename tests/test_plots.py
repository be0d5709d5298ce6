"""eval's PNG plots: what they draw, that they leave the result files alone, and the line without matplotlib."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest
from PIL import Image

from eval_manifests import dreambench_rows, write_csv, write_masks
from masc_core.evaluation import discrimination, plots
from masc_core.evaluation.records import read_records
from test_evaluate import FAST, call, read_bytes

EVAL = FAST + ["--chunk-size", "8", "--bootstrap", "50", "--baselines", "global", "--quiet"]
RESULT_FILES = ("results.jsonl", "results.csv", "summary.json")


def pair_rows(same_only: bool = False) -> list[dict]:
    rows = dreambench_rows(references=("dog_00", "cat_00"), methods=("m",), prompts=2, seeds=4, ratings=False, seed=3)
    for row in rows:
        shown = os.path.basename(row["out"]).rsplit("_", 1)[0]
        row["same_subject"] = 1 if same_only else int(shown == row["subject"].replace(" ", "_"))
        row["out_mask"] = (
            row["out_mask"] if row["out_mask"] != "masks/tiny.png" else f"masks/{os.path.basename(row['out'])[:-4]}.png"
        )
    return rows


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plots")
    write_masks(str(folder))
    write_csv(
        str(folder / "rated.csv"),
        dreambench_rows(references=("dog_00", "cat_00", "teapot_00"), methods=("a", "b"), prompts=2, seeds=3, seed=2),
    )
    write_csv(str(folder / "pairs.csv"), pair_rows())
    write_csv(str(folder / "same.csv"), pair_rows(same_only=True))
    return folder


@pytest.fixture(scope="module")
def rated_runs(workspace, naflex_dir):
    """The rated manifest scored twice: with plots and with --no-plots."""
    runs = {}
    for name, extra in (("plots", []), ("bare", ["--no-plots"])):
        code, _, err = call(
            "eval", workspace / "rated.csv", "--model", naflex_dir, *EVAL, "--out-dir", workspace / name, *extra
        )
        assert code == 0, err
        runs[name] = workspace / name
    return runs


def png_size(path) -> tuple[int, int]:
    with Image.open(path) as image:
        assert image.format == "PNG"
        return image.size


def test_plots_are_written_beside_the_summary(rated_runs):
    folder = rated_runs["plots"]
    names = sorted(n for n in os.listdir(folder) if n.endswith(".png"))
    assert names == ["plot_agreement_cp.png", "plot_agreement_pf.png", "plot_methods.png"]
    assert png_size(folder / "plot_agreement_cp.png") == (920, 360)  # cp and global_cp side by side
    assert not any(n.endswith(".png") for n in os.listdir(rated_runs["bare"]))


def test_plots_do_not_change_the_result_files(rated_runs, workspace, naflex_dir):
    for name in RESULT_FILES:
        assert read_bytes(rated_runs["plots"], name) == read_bytes(rated_runs["bare"], name), name
    # Drawing them again over a finished run (nothing rescored) keeps the files too.
    code, _, err = call("eval", workspace / "rated.csv", "--model", naflex_dir, *EVAL, "--out-dir", rated_runs["bare"])
    assert code == 0, err
    assert os.path.exists(rated_runs["bare"] / "plot_methods.png")
    for name in RESULT_FILES:
        assert read_bytes(rated_runs["plots"], name) == read_bytes(rated_runs["bare"], name), name


@pytest.fixture
def drawn(monkeypatch):
    """The figures write_plots would save, by file name (nothing written)."""
    figures = {}

    def keep(figure, path):
        figures[os.path.basename(path)] = figure
        return path

    monkeypatch.setattr(plots, "_save", keep)
    return figures


def stored(folder):
    rows = read_records(os.path.join(folder, "results.jsonl"))
    return [rows[i] for i in sorted(rows)]


def test_agreement_plot_draws_each_row_per_rater_with_the_summary_numbers(rated_runs, drawn):
    folder = rated_runs["plots"]
    summary = json.load(open(folder / "summary.json"))
    plots.write_plots(str(folder), stored(folder), summary)
    block = summary["agreement"]["cp"]
    axes = drawn["plot_agreement_cp.png"].axes
    assert [a.get_xlabel() for a in axes] == ["cp", "global_cp"]
    rows = [r for r in stored(folder) if r.human_cp is not None and not r.filtered]
    for axis, name in zip(axes, ["cp", "global_cp"]):
        stats = block["metrics"][name]
        assert (
            axis.get_title()
            == f"{name}: α {stats['krippendorff_alpha']:+.3f}, ρ {stats['spearman']:+.3f} (n={stats['n']})"
        )
        by_rater = {
            label.get_text().split(":")[0]: collection
            for label, collection in zip(axis.get_legend().get_texts(), axis.collections)
        }
        for rater in ("r1", "r2"):
            points = by_rater[rater].get_offsets()
            mine = [r for r in rows if rater in r.ratings["cp"]]
            assert len(points) == block["by_rater"][rater]["n"] == len(mine)
            np.testing.assert_array_equal(points[:, 0], [r.metrics[name] for r in mine])
            assert np.all(np.abs(points[:, 1] - [r.ratings["cp"][rater] for r in mine]) <= plots._JITTER)


def test_methods_plot_draws_means_spreads_and_seed_means(rated_runs, drawn):
    folder = rated_runs["plots"]
    summary = json.load(open(folder / "summary.json"))
    plots.write_plots(str(folder), stored(folder), summary)
    cp_axis = drawn["plot_methods.png"].axes[0]
    heights = [patch.get_height() for patch in cp_axis.patches]
    expected = [summary["methods"][m]["metrics"][name]["mean"] for name in ("cp", "global_cp") for m in ("a", "b")]
    assert heights == pytest.approx(expected, abs=1e-12)
    from matplotlib.collections import PathCollection

    dots = np.concatenate([c.get_offsets()[:, 1] for c in cp_axis.collections if isinstance(c, PathCollection)])
    seed_means = [
        v
        for name in ("cp", "global_cp")
        for m in ("a", "b")
        for v in summary["methods"][m]["metrics"][name]["seed_means"].values()
    ]
    assert sorted(dots) == pytest.approx(sorted(seed_means), abs=1e-12)


def test_identity_roc_plot(workspace, naflex_dir, tmp_path, drawn):
    out_dir = tmp_path / "pairs"
    code, out, err = call(
        "eval", workspace / "pairs.csv", "--model", naflex_dir, *EVAL, "--out-dir", out_dir, "--no-plots"
    )
    assert code == 0, err
    summary = json.load(open(out_dir / "summary.json"))
    block = summary["identity"]
    assert block["same_subject"] and block["cross_subject"]
    written, note = plots.write_plots(str(out_dir), stored(out_dir), summary)
    assert note is None and [os.path.basename(p) for p in written] == ["plot_methods.png", "plot_identity_roc.png"]
    axis = drawn["plot_identity_roc.png"].axes[0]
    rows = [r for r in stored(out_dir) if not r.filtered]
    labels = [r.same_subject for r in rows]
    for line, name in zip(axis.get_lines(), ("cp", "global_cp")):
        fpr, tpr, _ = discrimination.roc_curve([r.metrics[name] for r in rows], labels)
        np.testing.assert_array_equal(line.get_xdata(), fpr)
        np.testing.assert_array_equal(line.get_ydata(), tpr)
        assert line.get_label().startswith(f"{name}: AUC {block['metrics'][name]['auc']:.3f} [")


def test_single_class_identity_says_why_there_is_no_roc(workspace, naflex_dir, tmp_path):
    out_dir = tmp_path / "same"
    code, out, err = call("eval", workspace / "same.csv", "--model", naflex_dir, *EVAL, "--out-dir", out_dir)
    assert code == 0, err
    assert "no ROC plot: only same-subject pairs (" in err
    assert "only same-subject pairs (" in out and "the AUC needs both same-subject and cross-subject pairs" in out
    assert not os.path.exists(out_dir / "plot_identity_roc.png") and os.path.exists(out_dir / "plot_methods.png")


def test_without_matplotlib_one_line_and_no_failure(workspace, naflex_dir, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    out_dir = tmp_path / "no-matplotlib"
    code, out, err = call("eval", workspace / "rated.csv", "--model", naflex_dir, *EVAL, "--out-dir", out_dir)
    assert code == 0, err
    assert err == "plots not written: matplotlib is not installed (pip install 'masc-comfyui[plots]' gives them)\n"
    assert os.path.exists(out_dir / "summary.json") and not any(n.endswith(".png") for n in os.listdir(out_dir))


def test_stale_plots_go_and_merge_draws_them(workspace, naflex_dir, tmp_path):
    out_dir = tmp_path / "sharded"
    for index in range(2):
        code, _, err = call(
            "eval", workspace / "rated.csv", "--model", naflex_dir, *EVAL, "--out-dir", out_dir, "--shard", f"{index}/2"
        )
        assert code == 0, err
    assert not any(n.endswith(".png") for n in os.listdir(out_dir))  # shards draw nothing
    (out_dir / "plot_identity_roc.png").write_bytes(b"an older run's plot")
    code, out, err = call("merge", out_dir, "--quiet")
    assert code == 0, err
    assert sorted(n for n in os.listdir(out_dir) if n.endswith(".png")) == [
        "plot_agreement_cp.png",
        "plot_agreement_pf.png",
        "plot_methods.png",
    ]
    # An eval into a folder removes the old plots before it starts: an interrupted run leaves none of them behind.
    unrated = [
        {k: v for k, v in row.items() if not k.startswith("human_")}
        for row in dreambench_rows(references=("dog_00",), methods=("a",), prompts=1, seeds=2)
    ]
    write_csv(str(workspace / "unrated.csv"), unrated)
    code, _, err = call("eval", workspace / "unrated.csv", "--model", naflex_dir, *EVAL, "--out-dir", out_dir)
    assert code == 0, err
    assert sorted(n for n in os.listdir(out_dir) if n.endswith(".png")) == ["plot_methods.png"]
