"""Identity discrimination (the paper's ORIDa regime, Sec. 4.2): how well a metric tells same-subject pairs from others.

Each row is a pair: a reference photo and another photo ``out`` that shows
the same subject (a positive, ``same_subject`` 1) or another subject (a
negative, 0). A concept metric should score the positives higher. The
statistic is the paper's ``AUC(within > cross)``: the probability that a
random positive scores above a random negative, a tie counting one half.
That is the area under the ROC curve, and the Mann-Whitney U statistic
divided by (positives x negatives), i.e. the positives' average ranks.

- Ties: counted one half (average ranks), as ``sklearn.metrics.roc_auc_score``
  does; the number of tied (positive, negative) pairs is reported, since a
  metric with coarse values (a 0-4 rubric) loses AUC to them.
- Undefined: with only one class there is nothing to separate: the AUC is
  None and the block says why. Rows whose score is undefined are left out
  by the caller (and counted there).
- Confidence interval: percentile bootstrap, stratified (positives and
  negatives are resampled separately, so every resample keeps both classes
  and their counts), from a generator seeded with the user's seed and the
  comparison's name, the same resamples for every metric (paired). Each
  resample's AUC is computed exactly from resample counts, O(rows) per
  resample, without re-sorting.

No scipy or scikit-learn is needed; the tests compare with scikit-learn.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .agreement import DEFAULT_BOOTSTRAP, DEFAULT_SEED, stable_seed

STATISTIC = "ROC AUC: P(a same-subject pair scores above a cross-subject pair), ties count 1/2 (average ranks)"
INTERVAL = "95% percentile bootstrap over pairs, stratified by label, the same resamples for every metric"
SINGLE_CLASS = "only {which} pairs ({count}): the AUC needs both same-subject and cross-subject pairs"

# Bootstrap resamples are processed in blocks of about this many resamples x rows.
_BLOCK_ELEMENTS = 4_000_000


def _split(scores: Sequence[float], labels: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    values = np.asarray(scores, dtype=np.float64)
    truth = np.asarray(labels, dtype=bool)
    if values.shape != truth.shape or values.ndim != 1:
        raise ValueError(f"scores {values.shape} and labels {truth.shape} must be two vectors of one length")
    if not np.all(np.isfinite(values)):
        raise ValueError("scores must be finite: leave rows with an undefined score out")
    return values[truth], values[~truth]


class _Counts:
    """For each positive: how many negatives score below it and how many tie with it (sorted once)."""

    def __init__(self, positives: np.ndarray, negatives: np.ndarray):
        self.order = np.argsort(negatives, kind="stable")
        ordered = negatives[self.order]
        self.below = np.searchsorted(ordered, positives, side="left")
        self.up_to = np.searchsorted(ordered, positives, side="right")
        self.n_pos, self.n_neg = positives.size, negatives.size

    def auc(self) -> float:
        # Integers and halves: the sum is exact, the one division rounds once.
        wins = float(self.below.sum()) + 0.5 * float((self.up_to - self.below).sum())
        return wins / (self.n_pos * self.n_neg)

    def tied_pairs(self) -> int:
        return int((self.up_to - self.below).sum())

    def resampled(self, positive_draws: np.ndarray, negative_draws: np.ndarray) -> np.ndarray:
        """AUC of each resample: row b takes positives ``positive_draws[b]`` and negatives ``negative_draws[b]``."""
        count = positive_draws.shape[0]
        offsets = np.arange(count)[:, None]
        # How often each negative (in sorted order) and each positive was drawn, per resample.
        rank_of = np.empty(self.n_neg, dtype=np.int64)
        rank_of[self.order] = np.arange(self.n_neg)
        negative_weights = np.bincount(
            (rank_of[negative_draws] + offsets * self.n_neg).ravel(), minlength=count * self.n_neg
        ).reshape(count, self.n_neg)
        positive_weights = np.bincount(
            (positive_draws + offsets * self.n_pos).ravel(), minlength=count * self.n_pos
        ).reshape(count, self.n_pos)
        cumulative = np.zeros((count, self.n_neg + 1), dtype=np.float64)
        np.cumsum(negative_weights, axis=1, out=cumulative[:, 1:])
        below = cumulative[:, self.below]
        ties = cumulative[:, self.up_to] - below
        wins = (positive_weights * (below + 0.5 * ties)).sum(axis=1)
        return wins / (self.n_pos * self.n_neg)


def roc_auc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """P(score of a random positive > score of a random negative) + 1/2 P(tie); None with one class only."""
    positives, negatives = _split(scores, labels)
    if positives.size == 0 or negatives.size == 0:
        return None
    return _Counts(positives, negatives).auc()


def roc_curve(scores: Sequence[float], labels: Sequence[bool]) -> tuple[list[float], list[float], list[float]]:
    """(false positive rates, true positive rates, thresholds): one point per distinct score, from (0, 0) to (1, 1).

    A pair is called "same subject" when its score is >= the threshold; the
    first point's threshold is +inf (nothing called). Both classes are needed.
    """
    positives, negatives = _split(scores, labels)
    if positives.size == 0 or negatives.size == 0:
        raise ValueError("a ROC curve needs both classes")
    thresholds = np.unique(np.concatenate([positives, negatives]))[::-1]
    # Scores >= t: the count minus those sorted before t.
    called_pos = positives.size - np.searchsorted(np.sort(positives), thresholds, side="left")
    called_neg = negatives.size - np.searchsorted(np.sort(negatives), thresholds, side="left")
    tpr = [0.0] + (called_pos / positives.size).tolist()
    fpr = [0.0] + (called_neg / negatives.size).tolist()
    return fpr, tpr, [math.inf] + thresholds.tolist()


def _moments(values: np.ndarray) -> tuple[float | None, float | None]:
    if values.size == 0:
        return None, None
    mean = math.fsum(values.tolist()) / values.size
    std = math.sqrt(math.fsum(((values - mean) ** 2).tolist()) / (values.size - 1)) if values.size > 1 else None
    return mean, std


def _interval(values: np.ndarray) -> list[float]:
    low, high = np.percentile(values, [2.5, 97.5])
    return [float(low), float(high)]


def compare(
    metrics: dict[str, Sequence[float]],
    labels: Sequence[bool],
    *,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = DEFAULT_SEED,
    label: str = "",
) -> dict[str, dict]:
    """AUC of each metric on the same pairs, with paired, stratified bootstrap CIs.

    ``metrics``: name -> scores, all of ``labels``' length, finite. Returns
    name -> {n, auc, ci95, tied_pairs, same_subject: {n, mean, std},
    cross_subject: {n, mean, std}}. With one class only, ``auc`` and
    ``ci95`` are None (the caller says why).
    """
    truth = np.asarray(labels, dtype=bool)
    positives_at = np.flatnonzero(truth)
    negatives_at = np.flatnonzero(~truth)
    both = positives_at.size > 0 and negatives_at.size > 0
    draws = None
    if both and bootstrap > 0:
        rng = np.random.default_rng(stable_seed(seed, label))
        draws = (
            rng.integers(0, positives_at.size, size=(int(bootstrap), positives_at.size)),
            rng.integers(0, negatives_at.size, size=(int(bootstrap), negatives_at.size)),
        )
    results: dict[str, dict] = {}
    for name, scores in metrics.items():
        positives, negatives = _split(scores, truth)
        same_mean, same_std = _moments(positives)
        cross_mean, cross_std = _moments(negatives)
        entry = {
            "n": int(truth.size),
            "auc": None,
            "ci95": None,
            "tied_pairs": 0,
            "same_subject": {"n": int(positives.size), "mean": same_mean, "std": same_std},
            "cross_subject": {"n": int(negatives.size), "mean": cross_mean, "std": cross_std},
        }
        if both:
            counts = _Counts(positives, negatives)
            entry.update(auc=counts.auc(), tied_pairs=counts.tied_pairs())
            if draws is not None:
                block = max(1, _BLOCK_ELEMENTS // int(truth.size))
                aucs = np.concatenate(
                    [
                        counts.resampled(draws[0][i : i + block], draws[1][i : i + block])
                        for i in range(0, int(bootstrap), block)
                    ]
                )
                entry["ci95"] = _interval(aucs)
        results[name] = entry
    return results
