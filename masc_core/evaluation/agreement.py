"""Agreement between a metric and human ratings: Krippendorff's alpha, Spearman's rho, bootstrap CIs.

What the paper reports (Sec. 4.1, 4.3): Krippendorff's alpha at the interval
level and Spearman's rho between a metric and the pooled human ratings, over
the same set of keys for every metric compared.

- Rating scale. Cosines (about -1..1) and ratings (DreamBench++: 0..4) live
  on different scales, and alpha, unlike rho, measures absolute agreement.
  The metric is therefore mapped linearly onto the rating scale before
  alpha: its minimum over the rows compared goes to the scale's low end,
  its maximum to the high end (``minmax``, the default), or it is used as is
  (``none``). The mapping is fitted once per metric and aspect on all rows
  compared and then held fixed for the per-method and per-rater numbers and
  inside the bootstrap. Spearman's rho is invariant under it (any
  increasing map keeps the ranks).
- Alpha is the interval-level alpha with the metric as one coder and the
  pooled human rating as the other. ``krippendorff.alpha`` computes it when
  the data are small enough for it: that package builds a units x values x
  values array, so continuous scores over thousands of keys would need tens
  of gigabytes. Larger data use :func:`interval_alpha`, the same quantity in
  closed form, O(units); the tests check the two agree to 1e-12.
- Rho is ``scipy.stats.spearmanr``.
- Confidence intervals: percentile bootstrap over units (rows), with a seeded
  generator, the same resamples for every metric of one comparison (paired),
  so the intervals are deterministic and comparable side by side.

scipy and krippendorff are imported only when needed; without them the
caller gets one line saying to install the ``eval`` extra.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..errors import MascError, MascInputError

DEFAULT_RATING_SCALE = (0.0, 4.0)
"""DreamBench++'s 0..4 rubric."""
DEFAULT_BOOTSTRAP = 1000
DEFAULT_SEED = 0
MAPPINGS = ("minmax", "none")
INSTALL_HINT = "pip install 'masc-comfyui[eval]'"

# krippendorff.alpha allocates units x values x values floats; above this
# many elements the closed form is used instead (~40 MB of float64).
_PACKAGE_BUDGET = 5_000_000
# Bootstrap resamples are processed in blocks of this many units x resamples.
_BLOCK_ELEMENTS = 4_000_000


def require(module: str):
    """Import an optional evaluation dependency, or fail with one line saying how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise MascError(f"agreement statistics need the '{module}' package: {INSTALL_HINT}") from None


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


# ---------------------------------------------------------------- rating scale


@dataclass(frozen=True)
class ScaleMapping:
    """How metric values are put on the rating scale before alpha."""

    kind: str
    """``minmax`` (linear, min -> low, max -> high) or ``none`` (values as they are)."""
    low: float
    high: float
    metric_min: float | None = None
    metric_max: float | None = None

    def apply(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        if self.kind == "none":
            return values
        span = self.metric_max - self.metric_min
        if span <= 0:
            # Every value is the same: put them all in the middle of the scale.
            return np.full_like(values, (self.low + self.high) / 2.0)
        return self.low + (values - self.metric_min) * ((self.high - self.low) / span)

    def to_dict(self) -> dict:
        data = {"kind": self.kind, "scale": [self.low, self.high]}
        if self.kind == "minmax":
            data.update(metric_min=self.metric_min, metric_max=self.metric_max)
        return data


def fit_mapping(
    values: Sequence[float], scale: tuple[float, float] = DEFAULT_RATING_SCALE, kind: str = "minmax"
) -> ScaleMapping:
    """The mapping of ``values`` onto ``scale`` (fitted on these values for ``minmax``)."""
    if kind not in MAPPINGS:
        raise MascInputError(f"rating map '{kind}' is unknown: use {' or '.join(MAPPINGS)}")
    low, high = (float(scale[0]), float(scale[1]))
    if not high > low:
        raise MascInputError(f"rating scale {low:g}..{high:g} is empty: give LOW < HIGH")
    if kind == "none":
        return ScaleMapping("none", low, high)
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        return ScaleMapping("minmax", low, high, None, None)
    return ScaleMapping("minmax", low, high, float(array.min()), float(array.max()))


# ---------------------------------------------------------------- alpha


def _unit_terms(reliability: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per unit: pairable value count m, sum, sum of squares (centred), within-unit disagreement / (m - 1)."""
    data = np.asarray(reliability, dtype=np.float64)
    present = ~np.isnan(data)
    counts = present.sum(axis=0)
    pairable = counts >= 2
    values = np.where(present & pairable[None, :], data, 0.0)
    if pairable.any():
        # Alpha does not change when every value is shifted; centring keeps
        # the sums of squares free of cancellation.
        values = np.where(present & pairable[None, :], values - values[present & pairable[None, :]].mean(), 0.0)
    m = np.where(pairable, counts, 0).astype(np.float64)
    s1 = values.sum(axis=0)
    s2 = (values * values).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        within = np.where(pairable, 2.0 * (m * s2 - s1 * s1) / np.maximum(m - 1.0, 1.0), 0.0)
    return m, s1, s2, within


def _alpha_from_sums(n, total1, total2, within) -> np.ndarray:
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        observed = within / n
        expected = 2.0 * (n * total2 - total1 * total1) / (n * (n - 1.0))
        alpha = 1.0 - observed / expected
    return np.where((n >= 2) & (expected > 0), alpha, np.nan)


def interval_alpha(reliability: np.ndarray, resamples: np.ndarray | None = None) -> float | np.ndarray:
    """Krippendorff's alpha, interval level, in closed form.

    ``reliability`` is [coders, units] with NaN for missing values (the
    layout ``krippendorff.alpha`` takes). With the squared difference as the
    distance, D_o = (1/n) sum_u sum_{i != j in u} (v_i - v_j)^2 / (m_u - 1)
    and D_e = sum_{i != j} (v_i - v_j)^2 / (n (n - 1)) over all pairable
    values, so both reduce to per-unit counts, sums and sums of squares.

    ``resamples`` [B, units'] (unit indices, e.g. bootstrap draws) gives one
    alpha per row, each equal to the alpha of the matrix with those columns;
    without it, one alpha (NaN when undefined).
    """
    m, s1, s2, within = _unit_terms(reliability)
    if resamples is None:
        return float(_alpha_from_sums(m.sum(), s1.sum(), s2.sum(), within.sum()))
    return _alpha_from_sums(
        m[resamples].sum(axis=1), s1[resamples].sum(axis=1), s2[resamples].sum(axis=1), within[resamples].sum(axis=1)
    )


def krippendorff_alpha(reliability: np.ndarray) -> float | None:
    """Interval alpha of [coders, units] data (NaN = missing); None when undefined (no variation, < 2 pairable
    values)."""
    data = np.asarray(reliability, dtype=np.float64)
    paired = data[:, (~np.isnan(data)).sum(axis=0) >= 2]
    values = np.unique(paired[~np.isnan(paired)])
    if values.size < 2:
        return None
    if paired.shape[1] * values.size * values.size <= _PACKAGE_BUDGET:
        krippendorff = require("krippendorff")
        return _finite(krippendorff.alpha(reliability_data=paired, level_of_measurement="interval"))
    return _finite(interval_alpha(paired))


# ---------------------------------------------------------------- rho


def spearman(x: Sequence[float], y: Sequence[float]) -> tuple[float | None, float | None]:
    """Spearman's rho and its two-sided p-value (scipy); None when undefined (constant input)."""
    stats = require("scipy.stats")
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.size < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return None, None
    result = stats.spearmanr(x, y)
    return _finite(result.statistic), _finite(result.pvalue)


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n along the last axis, tied values sharing their average rank, a row with NaN all NaN: what
    ``scipy.stats.rankdata(values, axis=-1)`` gives, in numpy alone (a report need not import scipy for it)."""
    values = np.asarray(values, dtype=np.float64)
    count = values.shape[-1]
    order = np.argsort(values, axis=-1, kind="stable")
    ordered = np.take_along_axis(values, order, axis=-1)
    starts = np.ones(values.shape, dtype=bool)  # where a run of equal values begins, in sorted order
    starts[..., 1:] = ordered[..., 1:] != ordered[..., :-1]
    ends = np.ones(values.shape, dtype=bool)
    ends[..., :-1] = starts[..., 1:]
    position = np.broadcast_to(np.arange(count), values.shape)
    first = np.maximum.accumulate(np.where(starts, position, 0), axis=-1)
    last = np.flip(np.minimum.accumulate(np.flip(np.where(ends, position, count - 1), axis=-1), axis=-1), axis=-1)
    ranks = np.empty(values.shape, dtype=np.float64)
    np.put_along_axis(ranks, order, (first + last) / 2.0 + 1.0, axis=-1)
    ranks[np.isnan(values).any(axis=-1)] = np.nan
    return ranks


def spearman_rho(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho alone (no p-value, so no scipy); None when undefined (constant input)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.size < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return None
    return _finite(spearman_resampled(x, y, np.arange(x.size)[None])[0])


def spearman_resampled(x: np.ndarray, y: np.ndarray, resamples: np.ndarray) -> np.ndarray:
    """Spearman's rho of (x[r], y[r]) for each row r of ``resamples``: Pearson on average ranks, as scipy."""
    rx = average_ranks(x[resamples])
    ry = average_ranks(y[resamples])
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (rx * ry).sum(axis=1) / np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))


# ---------------------------------------------------------------- bootstrap


def stable_seed(seed: int, *labels: str) -> list[int]:
    """A seed sequence for ``numpy.random.default_rng``: the user's seed plus stable hashes of the labels."""
    return [int(seed)] + [zlib.crc32(label.encode("utf-8")) for label in labels]


def resampled(rng: np.random.Generator, count: int, bootstrap: int, statistic) -> np.ndarray:
    """``statistic(draws)`` over ``bootstrap`` resamples of ``count`` units, drawn and evaluated a block at a time.

    The draws are exactly those of one ``rng.integers(0, count, size=(bootstrap, count))`` (the generator's
    stream does not depend on how it is cut), but at most ``_BLOCK_ELEMENTS`` of them are held at once, so a
    night's log is read in bounded memory.
    """
    rows = max(1, _BLOCK_ELEMENTS // max(1, count))
    blocks = [
        statistic(rng.integers(0, count, size=(min(rows, bootstrap - start), count)))
        for start in range(0, bootstrap, rows)
    ]
    return np.concatenate(blocks) if blocks else np.empty(0)


def _interval(values: np.ndarray) -> list[float] | None:
    finite = values[np.isfinite(values)]
    if finite.size < max(2, values.size // 2):
        return None
    low, high = np.percentile(finite, [2.5, 97.5])
    return [float(low), float(high)]


def compare(
    metrics: dict[str, np.ndarray],
    human: np.ndarray,
    mappings: dict[str, ScaleMapping],
    *,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = DEFAULT_SEED,
    label: str = "",
) -> dict[str, dict]:
    """Alpha and rho of each metric against ``human`` on the same units, with paired bootstrap CIs.

    ``metrics``: name -> values (raw metric scale), all of ``human``'s
    length, no missing values. Returns name -> {n, krippendorff_alpha,
    spearman, spearman_p, ci95: {krippendorff_alpha, spearman}}.
    """
    human = np.asarray(human, dtype=np.float64)
    count = int(human.size)
    results: dict[str, dict] = {}
    mapped = {name: mappings[name].apply(values) for name, values in metrics.items()}
    for name, values in metrics.items():
        reliability = np.stack([human, mapped[name]])
        rho, p_value = spearman(values, human) if count >= 2 else (None, None)
        results[name] = {
            "n": count,
            "krippendorff_alpha": krippendorff_alpha(reliability) if count >= 2 else None,
            "spearman": rho,
            "spearman_p": p_value,
            "ci95": {"krippendorff_alpha": None, "spearman": None},
        }
    if bootstrap <= 0 or count < 2:
        return results
    rng = np.random.default_rng(stable_seed(seed, label))
    draws = rng.integers(0, count, size=(int(bootstrap), count))
    block = max(1, _BLOCK_ELEMENTS // count)
    for name, values in metrics.items():
        values = np.asarray(values, dtype=np.float64)
        reliability = np.stack([human, mapped[name]])
        alphas = np.concatenate(
            [interval_alpha(reliability, draws[i : i + block]) for i in range(0, len(draws), block)]
        )
        rhos = np.concatenate(
            [spearman_resampled(values, human, draws[i : i + block]) for i in range(0, len(draws), block)]
        )
        results[name]["ci95"] = {"krippendorff_alpha": _interval(alphas), "spearman": _interval(rhos)}
    return results


def inter_rater(
    ratings: np.ndarray, *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = DEFAULT_SEED, label: str = ""
) -> dict:
    """Alpha among human raters ([raters, units], NaN = not rated): the ceiling a metric can approach."""
    data = np.asarray(ratings, dtype=np.float64)
    paired = data[:, (~np.isnan(data)).sum(axis=0) >= 2]
    result = {"n": int(paired.shape[1]), "krippendorff_alpha": krippendorff_alpha(paired), "ci95": None}
    if bootstrap > 0 and paired.shape[1] >= 2:
        rng = np.random.default_rng(stable_seed(seed, label))
        draws = rng.integers(0, paired.shape[1], size=(int(bootstrap), paired.shape[1]))
        result["ci95"] = _interval(interval_alpha(paired, draws))
    return result
