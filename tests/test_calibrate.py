"""calibrate: the artist's picks from a score log against CP and PF, and the thresholds they suggest."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from masc_core.errors import MascInputError
from masc_core.evaluation.calibration import calibrate, min_picks, suggested_threshold
from masc_core.evaluation.score_log import append_rows, log_path, log_rows, read_log
from masc_core.selection.picks import PASSED_OVER, PICKED
from masc_core.metric.scores import ImageScore, ReferenceInfo, ScoreBatch, ScoreContext

ROOT = __import__("os").path.dirname(__import__("os").path.dirname(__import__("os").path.abspath(__file__)))


def picked_round(rng, run_index: int, shown: int = 6, picks: int = 2):
    """One MaSC Pick round: CP drives the artist's choice (with noise), PF does not; two unshown candidates."""
    count = shown + 2
    cp = rng.uniform(0.3, 0.9, size=count)
    pf = rng.uniform(-0.1, 0.2, size=count)
    taste = cp[:shown] + rng.normal(0, 0.05, size=shown)
    chosen = set(np.argsort(-taste)[:picks].tolist())
    labels = [PICKED if i in chosen else PASSED_OVER for i in range(shown)] + [None, None]
    scores = [
        ImageScore(
            index=i, cp=float(cp[i]), pf=float(pf[i]), foreground_fraction=0.3, prompt="a sks dog", encoded_prompt="a"
        )
        for i in range(count)
    ]
    context = ScoreContext(node="MaSCPick", subject="sks dog", seeds=list(range(count)), labels=labels)
    return (
        ScoreBatch(scores=scores, references=[ReferenceInfo(0, (4, 4), 0.3, 5, False)], context=context),
        cp,
        pf,
        labels,
    )


def synthetic_log(tmp_path, name: str, rounds: int = 12, seed: int = 3):
    rng = np.random.default_rng(seed)
    path = log_path(str(tmp_path), name)
    truth = []
    for r in range(rounds):
        batch, cp, pf, labels = picked_round(rng, r)
        append_rows(path, log_rows(batch, time=f"t{r}", run=f"run{r}"))
        truth.extend((c, p, l) for c, p, l in zip(cp, pf, labels) if l is not None)
    return path, truth


@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
def test_auc_equals_scikit_learns_and_suggestions_reproduce(tmp_path, suffix):
    metrics = pytest.importorskip("sklearn.metrics")
    path, truth = synthetic_log(tmp_path, f"picks.{suffix}")
    result = calibrate(read_log(path), bootstrap=200)
    labels = [l == PICKED for _, _, l in truth]
    cp = [c for c, _, _ in truth]
    pf = [p for _, p, _ in truth]
    assert result["labelled"] == 72 and result["picked"] == 24 and result["passed_over"] == 48 and result["runs"] == 12
    assert result["scores"]["cp"]["auc"] == pytest.approx(metrics.roc_auc_score(labels, cp), abs=1e-12)
    assert result["scores"]["pf"]["auc"] == pytest.approx(metrics.roc_auc_score(labels, pf), abs=1e-12)
    both = [c + p for c, p in zip(cp, pf)]
    assert result["scores"]["both"]["auc"] == pytest.approx(metrics.roc_auc_score(labels, both), abs=1e-12)
    # CP drove the picks, PF did not: the report must tell them apart.
    assert result["scores"]["cp"]["auc"] > 0.85 and abs(result["scores"]["pf"]["auc"] - 0.5) < 0.2
    low, high = result["scores"]["cp"]["ci95"]
    assert low <= result["scores"]["cp"]["auc"] <= high
    # The suggestion by hand: 24 picks, keep 95% -> floor(24 * 0.05) = 1: the second-lowest picked CP.
    picked_cp = sorted(c for c, _, l in truth if l == PICKED)
    suggestion = result["scores"]["cp"]["suggestion"]
    assert suggestion["threshold"] == pytest.approx(picked_cp[1], abs=1e-12)
    assert suggestion["picked_kept"] == 23
    assert suggestion["passed_over_rejected"] == sum(1 for c, _, l in truth if l == PASSED_OVER and c < picked_cp[1])
    assert result["warnings"] == []
    again = calibrate(read_log(path), bootstrap=200)
    assert again == result  # seeded bootstrap: the same report twice


def test_csv_and_jsonl_logs_of_the_same_picks_agree(tmp_path):
    a, _ = synthetic_log(tmp_path, "a.jsonl")
    b, _ = synthetic_log(tmp_path, "b.csv")
    ra, rb = calibrate(read_log(a), bootstrap=50), calibrate(read_log(b), bootstrap=50)
    assert ra["scores"] == rb["scores"]


def test_threshold_keeps_the_share_asked_for():
    picked = [0.1, 0.5, 0.6, 0.7, 0.8]
    assert suggested_threshold(picked, [0.2, 0.55], keep=1.0)["threshold"] == 0.1
    assert suggested_threshold(picked, [0.2, 0.55], keep=0.8) == {
        "threshold": 0.5,
        "picked_kept": 4,
        "picked": 5,
        "passed_over_rejected": 1,
        "passed_over": 2,
    }
    assert min_picks(0.95) == 20 and min_picks(0.9) == 10 and min_picks(1.0) == 1


def test_few_picks_warn_and_defaults_teach_nothing(tmp_path):
    path, _ = synthetic_log(tmp_path, "few.jsonl", rounds=3)
    rows = read_log(path)
    # A default (timeout, API prompt) is logged without labels: adding such rows changes nothing.
    unlabelled = [dict(row, label=None, cp=0.99) for row in rows]
    result = calibrate(rows + unlabelled, bootstrap=0)
    assert result["picked"] == 6 and result["scores"]["cp"]["ci95"] is None
    assert result == dict(calibrate(rows, bootstrap=0))
    assert any("only 6 picks: below 20" in w for w in result["warnings"])


def test_logs_without_picks_are_one_line(tmp_path):
    path, _ = synthetic_log(tmp_path, "none.jsonl", rounds=1)
    rows = [dict(r, label=None) for r in read_log(path)]
    with pytest.raises(MascInputError, match="holds no picks"):
        calibrate(rows)
    with pytest.raises(MascInputError, match="all 2 labelled candidates were picked"):
        calibrate([dict(r, label=PICKED) for r in rows[:2]])


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "masc_core", "calibrate", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_command_prints_the_report_and_json(tmp_path):
    path, _ = synthetic_log(tmp_path, "picks.csv")
    done = run_cli(path, "--bootstrap", "100")
    assert done.returncode == 0, done.stderr
    assert "72 labelled candidates from 12 pick(s) in 'picks.csv': 24 picked, 48 passed over" in done.stdout
    assert "min_cp " in done.stdout and "min_pf " in done.stdout and done.stderr == ""
    as_json = run_cli(path, "--bootstrap", "100", "--json")
    assert json.loads(as_json.stdout) == calibrate(read_log(path), bootstrap=100, source="'picks.csv'")


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "does not exist"),
        ("not a log\n", "does not start with a header MaSC Log Scores writes"),
    ],
)
def test_command_refuses_what_is_not_a_log_in_one_line(tmp_path, content, message):
    path = tmp_path / "x.csv"
    if content is not None:
        path.write_text(content)
    done = run_cli(str(path))
    assert (
        done.returncode == 2
        and done.stderr.count("\n") == 1
        and message in done.stderr
        and "Traceback" not in done.stderr
    )


def test_command_refuses_a_log_without_picks(tmp_path):
    path, _ = synthetic_log(tmp_path, "p.jsonl", rounds=1)
    text = "".join(json.dumps(dict(json.loads(l), label=None)) + "\n" for l in open(path).read().splitlines())
    (tmp_path / "q.jsonl").write_text(text)
    done = run_cli(str(tmp_path / "q.jsonl"))
    assert done.returncode == 2 and "holds no picks" in done.stderr and done.stderr.count("\n") == 1
    bad = run_cli(path, "--keep", "1.5")
    assert bad.returncode == 2 and "--keep" in bad.stderr and bad.stderr.count("\n") == 1
