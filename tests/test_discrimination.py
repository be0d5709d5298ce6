"""Identity discrimination: ROC AUC against scikit-learn, the bootstrap, and the summary's identity block."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score
from sklearn.metrics import roc_curve as sklearn_roc_curve

from conftest import ROOT
from masc_core.evaluation import discrimination
from masc_core.evaluation.agreement import stable_seed
from masc_core.evaluation.records import EvalRecord
from masc_core.evaluation.report import summary_tables
from masc_core.evaluation.summary import SummaryOptions, summarize


def scores_and_labels(size: int, seed: int, *, tied: bool, positive_share: float = 0.4):
    rng = np.random.default_rng(seed)
    labels = rng.random(size) < positive_share
    labels[0], labels[1] = True, False  # both classes, always
    scores = rng.normal(size=size) + 0.7 * labels
    if tied:  # a coarse rubric: many ties within and across classes
        scores = np.clip(np.round(scores + 1.5), 0, 4)
    return scores, labels


@pytest.mark.parametrize("size", [2, 3, 17, 200, 4500])
@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auc_equals_scikit_learn(size, tied, seed):
    scores, labels = scores_and_labels(size, seed, tied=tied)
    assert discrimination.roc_auc(scores, labels) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)


def test_auc_extremes_and_all_ties():
    labels = [True, True, False, False, False]
    assert discrimination.roc_auc([5, 4, 3, 2, 1], labels) == 1.0
    assert discrimination.roc_auc([1, 2, 3, 4, 5], labels) == 0.0
    assert discrimination.roc_auc([2, 2, 2, 2, 2], labels) == 0.5 == roc_auc_score(labels, [2, 2, 2, 2, 2])
    # A tie between a positive and a negative counts 1/2: 5 of 6 pairs won, one tied.
    assert discrimination.roc_auc([3, 2, 2, 1, 0], labels) == pytest.approx(5.5 / 6, abs=1e-15)


def test_one_class_has_no_auc():
    assert discrimination.roc_auc([0.1, 0.5], [True, True]) is None
    assert discrimination.roc_auc([0.1, 0.5], [False, False]) is None
    result = discrimination.compare({"cp": [0.2, 0.4, 0.9]}, [True, True, True], bootstrap=50)
    assert result["cp"]["auc"] is None and result["cp"]["ci95"] is None
    assert result["cp"]["same_subject"]["n"] == 3 and result["cp"]["cross_subject"] == {
        "n": 0,
        "mean": None,
        "std": None,
    }


def test_undefined_scores_are_refused_not_counted():
    with pytest.raises(ValueError, match="finite"):
        discrimination.roc_auc([0.1, float("nan")], [True, False])


@pytest.mark.parametrize("tied", [False, True])
def test_roc_curve_equals_scikit_learn(tied):
    scores, labels = scores_and_labels(300, 4, tied=tied)
    fpr, tpr, thresholds = discrimination.roc_curve(scores, labels)
    expected_fpr, expected_tpr, expected_thresholds = sklearn_roc_curve(labels, scores, drop_intermediate=False)
    np.testing.assert_allclose(fpr, expected_fpr, atol=1e-15)
    np.testing.assert_allclose(tpr, expected_tpr, atol=1e-15)
    np.testing.assert_array_equal(thresholds[1:], expected_thresholds[1:])
    # The area under the drawn curve (trapezoids) is the AUC.
    assert np.trapezoid(tpr, fpr) == pytest.approx(discrimination.roc_auc(scores, labels), abs=1e-12)


@pytest.mark.parametrize("tied", [False, True])
def test_bootstrap_interval_is_the_resampled_aucs_percentiles(tied):
    """The vectorised resampling gives exactly scikit-learn's AUC of each resample (stratified draws)."""
    scores, labels = scores_and_labels(120, 5, tied=tied)
    result = discrimination.compare({"cp": scores}, labels, bootstrap=300, seed=7, label="identity")
    rng = np.random.default_rng(stable_seed(7, "identity"))
    positives, negatives = np.flatnonzero(labels), np.flatnonzero(~labels)
    positive_draws = rng.integers(0, positives.size, size=(300, positives.size))
    negative_draws = rng.integers(0, negatives.size, size=(300, negatives.size))
    aucs = []
    for b in range(300):
        picked = np.concatenate([positives[positive_draws[b]], negatives[negative_draws[b]]])
        aucs.append(roc_auc_score(labels[picked], scores[picked]))
    low, high = np.percentile(aucs, [2.5, 97.5])
    assert result["cp"]["ci95"] == pytest.approx([low, high], abs=1e-12)
    assert low <= result["cp"]["auc"] <= high


def test_bootstrap_is_seeded_paired_and_stable_across_processes():
    scores, labels = scores_and_labels(400, 6, tied=False)
    other = scores + np.random.default_rng(1).normal(0, 0.5, scores.size)
    first = discrimination.compare({"cp": scores, "global_cp": other}, labels, bootstrap=500, seed=3, label="identity")
    again = discrimination.compare({"cp": scores, "global_cp": other}, labels, bootstrap=500, seed=3, label="identity")
    assert first == again
    # Paired: a metric's interval does not depend on which other metrics are compared.
    alone = discrimination.compare({"cp": scores}, labels, bootstrap=500, seed=3, label="identity")
    assert alone["cp"] == first["cp"]
    assert (
        discrimination.compare({"cp": scores}, labels, bootstrap=500, seed=4, label="identity")["cp"]["ci95"]
        != first["cp"]["ci95"]
    )
    code = (
        "import json, numpy as np; from masc_core.evaluation import discrimination;"
        f"s = np.array({scores.tolist()!r}); y = np.array({labels.tolist()!r});"
        "print(json.dumps(discrimination.compare({'cp': s}, y, bootstrap=500, seed=3, label='identity')))"
    )
    other_process = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(other_process.stdout)["cp"] == first["cp"]


def test_tied_pairs_and_class_moments():
    labels = np.array([True, True, True, False, False])
    scores = np.array([0.9, 0.5, 0.5, 0.5, 0.1])
    result = discrimination.compare({"cp": scores}, labels, bootstrap=0)["cp"]
    assert result["tied_pairs"] == 2 and result["ci95"] is None
    assert result["auc"] == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    assert result["same_subject"]["mean"] == pytest.approx(np.mean(scores[labels]), abs=1e-15)
    assert result["same_subject"]["std"] == pytest.approx(np.std(scores[labels], ddof=1), abs=1e-15)
    assert result["cross_subject"] == {
        "n": 2,
        "mean": pytest.approx(0.3),
        "std": pytest.approx(np.std([0.5, 0.1], ddof=1)),
    }


# ---------------------------------------------------------------- the summary's identity block


def record(
    row: int, same: bool | None, cp: float | None, global_cp: float | None = None, *, method="m", filtered=False
):
    metrics = {"cp": cp, "pf": 0.1}
    if global_cp is not None:
        metrics["global_cp"] = global_cp
    return EvalRecord(
        row=row,
        id=None,
        method=method,
        seed=0,
        subject="dog",
        prompt="",
        encoded_prompt="",
        subject_found=False,
        ref=["a.png"],
        ref_mask=["a_mask.png"],
        out=f"{row}.png",
        out_mask=None,
        metrics=metrics,
        filtered=filtered,
        same_subject=same,
    )


def test_identity_block_counts_what_it_leaves_out():
    rng = np.random.default_rng(0)
    rows = []
    for i in range(60):
        same = i % 2 == 0
        rows.append(
            record(i, same, float(rng.normal(0.6 if same else 0.3, 0.1)), float(rng.normal(0.5 if same else 0.4, 0.1)))
        )
    rows[3] = record(3, False, None, 0.2)  # CP undefined (e.g. an empty reference mask)
    rows[4] = record(4, True, 0.9, 0.8, filtered=True)  # dropped by the mask filter
    summary = summarize(rows, SummaryOptions(bootstrap=200))
    block = summary["identity"]
    kept = [r for r in rows if not r.filtered and r.value("cp") is not None]
    labels = [r.same_subject for r in kept]
    assert block["n"] == len(kept) == 58 and block["labelled"] == 60
    assert block["excluded"] == {"filtered": 1, "undefined_metric": 1, "undefined_by_metric": {"cp": 1, "global_cp": 0}}
    assert list(block["metrics"]) == ["cp", "global_cp"] and block["headline"] == "cp"
    for name in ("cp", "global_cp"):
        expected = roc_auc_score(labels, [r.value(name) for r in kept])
        assert block["metrics"][name]["auc"] == pytest.approx(expected, abs=1e-12)
    assert block["auc"] == block["metrics"]["cp"]["auc"] and block["ci95"] == block["metrics"]["cp"]["ci95"]
    assert (block["same_subject"], block["cross_subject"]) == (sum(labels), len(labels) - sum(labels))
    assert "by_method" not in block and "note" not in block
    text = summary_tables(summary)
    assert "identity discrimination (n=58 labelled pairs: 29 same-subject, 29 cross-subject" in text
    assert "left out: 1 dropped by the filter (mask < 5% of the image); 1 with an undefined score (cp 1)" in text


def test_single_class_groups_are_said():
    rows = [record(i, True, 0.5 + 0.01 * i, method="only_same") for i in range(4)]
    rows += [record(4 + i, i % 2 == 0, 0.4 + 0.1 * i, method="mixed") for i in range(4)]
    block = summarize(rows, SummaryOptions(bootstrap=50))["identity"]
    assert block["auc"] is not None and "note" not in block
    assert block["by_method"]["only_same"]["metrics"]["cp"]["auc"] is None
    assert block["by_method"]["only_same"]["note"] == (
        "only same-subject pairs (4): the AUC needs both same-subject and cross-subject pairs"
    )
    assert block["by_method"]["mixed"]["metrics"]["cp"]["auc"] == roc_auc_score([1, 0, 1, 0], [0.4, 0.5, 0.6, 0.7])
    summary = summarize(rows[:4], SummaryOptions(bootstrap=50))
    assert summary["identity"]["auc"] is None and summary["identity"]["ci95"] is None
    assert "only same-subject pairs (4)" in summary["identity"]["note"]
    assert "only same-subject pairs (4): the AUC needs both" in summary_tables(summary)
    text = summary_tables(summarize(rows, SummaryOptions(bootstrap=50)))
    assert (
        "method 'only_same': only same-subject pairs (4)" in text
        and "AUC of cp per method: only_same n/a, mixed" in text
    )


def test_unlabelled_rows_have_no_identity_block():
    rows = [record(i, None, 0.5) for i in range(3)]
    assert "identity" not in summarize(rows, SummaryOptions(bootstrap=10))
