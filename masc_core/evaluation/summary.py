"""summary.json: per-method means over seeds, the paper's mask filter, and agreement with humans.

Computed from result rows alone (plus the options below), so the same rows
always give the same summary, whether they come from one run or from merged
shards. Sums are exact (``math.fsum``) and do not depend on row order.

- The filter (paper Sec. 3.1): a row is dropped when its output mask covers
  less than ``min_foreground`` of the image, or when any of its reference
  masks does (a failed reference spoils every prompt of that subject). The
  filter is applied to every metric alike; ``min_foreground=0`` keeps all.
- Means: per method and overall, per metric, over the kept rows where the
  metric is defined; ``seed_means`` per seed, and ``std_over_seeds`` the
  sample standard deviation of the per-seed means (the DreamBench protocol
  averages over seeds and reports their spread).
- Agreement (when the manifest has human ratings): per aspect (cp, pf), on
  the kept rows that have a rating and where every metric of that aspect is
  defined, so all metrics are compared on the same keys; overall (pooled
  human rating = mean over raters), per method, per rater, and among the
  raters. See ``agreement`` for the statistics and the rating-scale
  mapping.
- The mask-source study (``mask_sources`` given): the table of
  ``mask_study``, each source judged on the keys valid under every source.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Iterable

import numpy as np

from ..errors import MascInputError
from ..defaults import MIN_FOREGROUND_FRACTION
from . import agreement, discrimination
from .metrics import ASPECT_METRICS, ASPECTS, METRIC_ORDER
from .records import EvalRecord, as_record


@dataclass(frozen=True)
class SummaryOptions:
    """Everything besides the rows that the summary depends on."""

    min_foreground: float = MIN_FOREGROUND_FRACTION
    rating_scale: tuple[float, float] = agreement.DEFAULT_RATING_SCALE
    rating_map: str = "minmax"
    bootstrap: int = agreement.DEFAULT_BOOTSTRAP
    seed: int = agreement.DEFAULT_SEED
    mask_sources: tuple[str, ...] = ()
    """The mask-source study's sources in order (``mask_study``; deltas from the first); () for no study."""

    def __post_init__(self):
        if not 0.0 <= float(self.min_foreground) <= 1.0:
            raise MascInputError(
                f"--min-foreground is {self.min_foreground}: give a share of the image between 0 and 1"
            )
        low, high = self.rating_scale
        if not float(high) > float(low):
            raise MascInputError(f"--rating-scale {low:g} {high:g} is empty: give LOW < HIGH")
        if self.rating_map not in agreement.MAPPINGS:
            raise MascInputError(f"--rating-map '{self.rating_map}' is unknown: use {' or '.join(agreement.MAPPINGS)}")
        if int(self.bootstrap) < 0:
            raise MascInputError(f"--bootstrap is {self.bootstrap}: give 0 (no intervals) or more resamples")

    def to_dict(self) -> dict:
        data = asdict(self)
        data["rating_scale"] = [float(v) for v in self.rating_scale]
        data["min_foreground"] = float(self.min_foreground)
        data["mask_sources"] = list(self.mask_sources)
        if not self.mask_sources:  # only then: a run without the study keeps its summary's bytes
            del data["mask_sources"]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "SummaryOptions":
        return cls(
            min_foreground=float(data["min_foreground"]),
            rating_scale=(float(data["rating_scale"][0]), float(data["rating_scale"][1])),
            rating_map=str(data["rating_map"]),
            bootstrap=int(data["bootstrap"]),
            seed=int(data["seed"]),
            mask_sources=tuple(data.get("mask_sources") or ()),
        )


def metrics_present(records: Iterable[EvalRecord]) -> list[str]:
    """The metric columns the rows hold, in the canonical order (MaSC's first)."""
    keys: set[str] = set()
    for record in records:
        keys.update(record.metrics)
    return [name for name in METRIC_ORDER if name in keys]


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _std(values: list[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _seed_label(seed: Any) -> str:
    return "none" if seed is None else str(seed)


def _statistics(records: list[EvalRecord], metrics: list[str]) -> dict:
    kept = [r for r in records if not r.filtered]
    seeds = list(dict.fromkeys(_seed_label(r.seed) for r in kept))
    block: dict[str, Any] = {"rows": len(records), "kept": len(kept), "seeds": seeds, "metrics": {}}
    for name in metrics:
        defined = [r for r in kept if r.value(name) is not None]
        per_seed = {}
        for seed in seeds:
            values = [r.value(name) for r in defined if _seed_label(r.seed) == seed]
            if values:
                per_seed[seed] = _mean(values)
        block["metrics"][name] = {
            "n": len(defined),
            "undefined": len(kept) - len(defined),
            "mean": _mean([r.value(name) for r in defined]),
            "std_over_seeds": _std(list(per_seed.values())),
            "seed_means": per_seed,
        }
    return block


def agreement_rows(records: list[EvalRecord], aspect: str, names: list[str]) -> list[EvalRecord]:
    """The rows an aspect's agreement compares: kept, rated, every metric ``names`` defined (the same rows for all)."""
    return [
        r
        for r in records
        if r.human(aspect) is not None and not r.filtered and all(r.value(m) is not None for m in names)
    ]


def identity_rows(records: list[EvalRecord], names: list[str]) -> list[EvalRecord]:
    """The pairs the identity AUCs are computed on: labelled, kept, every concept metric ``names`` defined."""
    return [
        r
        for r in records
        if r.same_subject is not None and not r.filtered and all(r.value(m) is not None for m in names)
    ]


def _aspect_agreement(
    records: list[EvalRecord], aspect: str, metrics: list[str], options: SummaryOptions
) -> dict | None:
    names = [m for m in ASPECT_METRICS[aspect] if m in metrics]
    if not names:
        return None
    rated = [r for r in records if r.human(aspect) is not None]
    if not rated:
        return None
    units = agreement_rows(records, aspect, names)
    block: dict[str, Any] = {
        "n": len(units),
        "rated": len(rated),
        "excluded": {
            "filtered": sum(1 for r in rated if r.filtered),
            "undefined_metric": sum(1 for r in rated if not r.filtered and any(r.value(m) is None for m in names)),
        },
        "headline": names[0],
    }
    if not units:
        block["note"] = "no row has a rating and every metric defined after the filter"
        return block
    mappings = {
        m: agreement.fit_mapping([r.value(m) for r in units], options.rating_scale, options.rating_map) for m in names
    }
    block["mapping"] = {m: mappings[m].to_dict() for m in names}

    def compare(rows: list[dict], human: list[float], label: str) -> dict:
        return agreement.compare(
            {m: np.array([r.value(m) for r in rows], dtype=np.float64) for m in names},
            np.array(human, dtype=np.float64),
            mappings,
            bootstrap=options.bootstrap,
            seed=options.seed,
            label=label,
        )

    overall = compare(units, [r.human(aspect) for r in units], aspect)
    headline = overall[names[0]]
    block.update(
        krippendorff_alpha=headline["krippendorff_alpha"],
        spearman=headline["spearman"],
        ci95=headline["ci95"],
        metrics=overall,
    )
    methods = list(dict.fromkeys(r.method for r in units))
    if len(methods) > 1:
        block["by_method"] = {}
        for method in methods:
            rows = [r for r in units if r.method == method]
            block["by_method"][method] = {
                "n": len(rows),
                "metrics": compare(rows, [r.human(aspect) for r in rows], f"{aspect}/method/{method}"),
            }
    raters = list(dict.fromkeys(k for r in units for k in r.ratings.get(aspect, {}) if k))
    if raters:
        block["by_rater"] = {}
        for rater in raters:
            rows = [r for r in units if rater in r.ratings.get(aspect, {})]
            human = [r.ratings[aspect][rater] for r in rows]
            block["by_rater"][rater] = {"n": len(rows), "metrics": compare(rows, human, f"{aspect}/rater/{rater}")}
    if len(raters) > 1:
        table = np.full((len(raters), len(units)), np.nan)
        for j, r in enumerate(units):
            for i, rater in enumerate(raters):
                value = r.ratings.get(aspect, {}).get(rater)
                if value is not None:
                    table[i, j] = value
        block["inter_rater"] = dict(
            agreement.inter_rater(table, bootstrap=options.bootstrap, seed=options.seed, label=f"{aspect}/inter-rater"),
            raters=raters,
        )
    return block


def _class_counts(rows: list[EvalRecord]) -> dict:
    same = sum(1 for r in rows if r.same_subject)
    return {"same_subject": same, "cross_subject": len(rows) - same}


def _single_class_note(rows: list[EvalRecord]) -> str | None:
    counts = _class_counts(rows)
    if counts["same_subject"] and counts["cross_subject"]:
        return None
    which = "same-subject" if counts["same_subject"] else "cross-subject"
    return discrimination.SINGLE_CLASS.format(which=which, count=len(rows))


def _identity(records: list[EvalRecord], metrics: list[str], options: SummaryOptions) -> dict | None:
    labelled = [r for r in records if r.same_subject is not None]
    names = [m for m in ASPECT_METRICS["cp"] if m in metrics]
    if not labelled or not names:
        return None
    kept = [r for r in labelled if not r.filtered]
    units = identity_rows(records, names)
    block: dict[str, Any] = {
        "statistic": discrimination.STATISTIC,
        "interval": discrimination.INTERVAL,
        "n": len(units),
        "labelled": len(labelled),
        **_class_counts(units),
        "excluded": {
            "filtered": len(labelled) - len(kept),
            "undefined_metric": len(kept) - len(units),
            "undefined_by_metric": {m: sum(1 for r in kept if r.value(m) is None) for m in names},
        },
        "headline": names[0],
    }

    def compare(rows: list[EvalRecord], label: str) -> dict:
        return discrimination.compare(
            {m: [r.value(m) for r in rows] for m in names},
            [bool(r.same_subject) for r in rows],
            bootstrap=options.bootstrap,
            seed=options.seed,
            label=label,
        )

    if not units:
        block["note"] = "no labelled row is kept with every concept metric defined"
        return block
    overall = compare(units, "identity")
    block.update(auc=overall[names[0]]["auc"], ci95=overall[names[0]]["ci95"], metrics=overall)
    if note := _single_class_note(units):
        block["note"] = note
    methods = list(dict.fromkeys(r.method for r in units))
    if len(methods) > 1:
        block["by_method"] = {}
        for method in methods:
            rows = [r for r in units if r.method == method]
            entry = {"n": len(rows), **_class_counts(rows), "metrics": compare(rows, f"identity/method/{method}")}
            if note := _single_class_note(rows):
                entry["note"] = note
            block["by_method"][method] = entry
    return block


def summarize(records: Iterable[EvalRecord | dict], options: SummaryOptions) -> dict:
    """summary.json's content for result rows sorted by row (their filter flags already set).

    ``records`` may be ``EvalRecord``s or the objects of a results.jsonl.
    """
    records = [as_record(r) for r in records]
    metrics = metrics_present(records)
    summary: dict[str, Any] = {
        "rows": len(records),
        "metrics": metrics,
        "options": options.to_dict(),
        "filter": {
            "min_foreground": float(options.min_foreground),
            "small_out_mask": sum(1 for r in records if r.small_out_mask),
            "small_ref_mask": sum(1 for r in records if r.small_ref_mask),
            "kept": sum(1 for r in records if not r.filtered),
            "dropped": sum(1 for r in records if r.filtered),
        },
        "overall": _statistics(records, metrics),
        "methods": {},
    }
    for method in dict.fromkeys(r.method for r in records):
        summary["methods"][method] = _statistics([r for r in records if r.method == method], metrics)
    blocks = {}
    for aspect in ASPECTS:
        block = _aspect_agreement(records, aspect, metrics, options)
        if block is not None:
            blocks[aspect] = block
    if blocks:
        summary["agreement"] = blocks
    identity = _identity(records, metrics, options)
    if identity is not None:
        summary["identity"] = identity
    if options.mask_sources:
        from .mask_study import study

        summary["mask_sources"] = study(records, options.mask_sources, options)
    return summary
