"""``calibrate``: how well CP, PF and their weighted sum agree with the artist's picks, and the thresholds they suggest.

The labels are the ones MaSC Pick writes into the score log: a candidate the
artist saw is "picked" or "passed over"; candidates not shown and defaults
(a timeout, an API prompt) carry no label and are not used.

- Agreement: ROC AUC of each score against the labels (picked = positive),
  ties one half, with the stratified percentile bootstrap of
  ``discrimination.compare`` (the same resamples for every score). 0.5 is
  chance; 1 means every picked candidate scored above every passed-over one.
- Suggested threshold for CP and for PF: the highest value that still keeps
  ``keep`` (default 95%) of the picked candidates, with how much of what was
  passed over it would reject. With fewer than ``1 / (1 - keep)`` picks (20
  at 95%) that is simply the lowest pick, one pick moves it, so a warning
  says so.
- Rows whose score is undefined (no background for PF, an empty mask) are
  left out of that score only, and counted.

Picks are taken as independent: the bootstrap resamples candidates, not
rounds, so with a few long rounds the interval is too narrow. It says so.
A labelled row MaSC would not write (a run id that is a list, a cp that is
text) is left out and counted in the report.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Iterable

from ..errors import MascInputError
from ..selection.picks import LABELS, PICKED
from ..selection.ranking import ranking_key
from ..metric.scores import ImageScore
from .agreement import DEFAULT_BOOTSTRAP, DEFAULT_SEED
from .discrimination import compare
from .score_log import left_out_line, log_key, log_score

DEFAULT_KEEP = 0.95
"""Share of the picked candidates a suggested threshold keeps."""
ABSOLUTE_MIN_PASSED_OVER = 5
"""Below this many passed-over candidates the rejection rates say little: warned about."""


def min_picks(keep: float) -> int:
    """Picks needed before the ``keep`` quantile is more than the single lowest pick."""
    return math.ceil(1.0 / (1.0 - keep) - 1e-9) if keep < 1 else 1


def suggested_threshold(picked: list[float], passed_over: list[float], keep: float) -> dict[str, Any]:
    """The highest threshold keeping at least ``keep`` of ``picked`` (a score passes when >= threshold)."""
    ordered = sorted(picked)
    position = math.floor(len(ordered) * (1.0 - keep) + 1e-9)
    threshold = ordered[min(position, len(ordered) - 1)]
    kept = sum(1 for v in picked if v >= threshold)
    rejected = sum(1 for v in passed_over if v < threshold)
    return {
        "threshold": threshold,
        "picked_kept": kept,
        "picked": len(picked),
        "passed_over_rejected": rejected,
        "passed_over": len(passed_over),
    }


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def calibrate(
    rows: Iterable[dict[str, Any]],
    *,
    keep: float = DEFAULT_KEEP,
    cp_weight: float = 1.0,
    pf_weight: float = 1.0,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = DEFAULT_SEED,
    source: str = "the log",
) -> dict[str, Any]:
    """Agreement with the picks and suggested ``min_cp`` / ``min_pf`` from score-log rows; one line when there are no
    picks."""
    if not 0.0 < keep <= 1.0:
        raise MascInputError(f"--keep {keep} must be above 0 and at most 1 (the share of picks a threshold keeps)")
    labelled, picked_rows, left_out = _labelled(rows, source)
    scores = _scores(labelled, keep=keep, cp_weight=cp_weight, pf_weight=pf_weight, bootstrap=bootstrap, seed=seed)
    warnings = []
    needed = min_picks(keep)
    if len(picked_rows) < needed:
        warnings.append(
            f"only {len(picked_rows)} picks: below {needed}, keeping {keep:.0%} of them means keeping the lowest pick, "
            "so one "
            "more pick can move a suggestion; pick more before trusting it"
        )
    passed_count = len(labelled) - len(picked_rows)
    if passed_count < ABSOLUTE_MIN_PASSED_OVER:
        warnings.append(f"only {passed_count} passed-over candidates: the rejection rates and the AUC rest on very few")
    runs = {row.get("run") for row in labelled}
    return {
        "source": source,
        "labelled": len(labelled),
        "picked": len(picked_rows),
        "passed_over": passed_count,
        "runs": len(runs),
        "keep": keep,
        "weights": {"cp": cp_weight, "pf": pf_weight},
        "bootstrap": bootstrap,
        "seed": seed,
        "scores": scores,
        "warnings": warnings,
        "left_out": dict(left_out),
    }


def _labelled(rows: Iterable[dict[str, Any]], source: str) -> tuple[list[dict], list[dict], Counter]:
    """The usable rows labelled picked or passed over, the picked ones, and why others were left out; one line when
    they cannot tell anything apart."""
    labelled, left_out = [], Counter()
    for row in rows:
        if row.get("label") not in LABELS:
            continue
        if not log_key(row.get("run")):
            left_out["run is not a text or whole number"] += 1
        elif not (log_score(row.get("cp")) and log_score(row.get("pf"))):
            left_out["cp or pf is not a number"] += 1
        else:
            labelled.append(row)
    if not labelled:
        raise MascInputError(
            f"{source} holds no picks (no usable row labelled picked or passed "
            f"over{'; ' + left_out_line(left_out) if left_out else ''}): log MaSC Pick's scores with MaSC Log "
            "Scores, "
            "pick in the browser a few times, then calibrate"
        )
    picked_rows = [row for row in labelled if row["label"] == PICKED]
    if len(picked_rows) == len(labelled):
        raise MascInputError(
            f"{source}: all {len(labelled)} labelled candidates were picked: nothing was passed over to tell apart"
        )
    if not picked_rows:
        raise MascInputError(f"{source}: none of the {len(labelled)} labelled candidates was picked")
    return labelled, picked_rows, left_out


def _scores(
    labelled: list[dict], *, keep: float, cp_weight: float, pf_weight: float, bootstrap: int, seed: int
) -> dict:
    """Per key (cp, pf and the both key): how well it tells picks from the passed over (AUC) and the threshold that
    keeps ``keep`` of the picks."""
    columns = {
        "cp": [_number(row.get("cp")) for row in labelled],
        "pf": [_number(row.get("pf")) for row in labelled],
    }
    columns["both"] = [  # the key rank_by both ranks by
        ranking_key(ImageScore(index=0, cp=cp, pf=pf), "both", cp_weight, pf_weight)
        for cp, pf in zip(columns["cp"], columns["pf"])
    ]
    truth = [row["label"] == PICKED for row in labelled]
    scores: dict[str, Any] = {}
    for name, values in columns.items():
        at = [i for i, v in enumerate(values) if v is not None]
        picked = [values[i] for i in at if truth[i]]
        passed = [values[i] for i in at if not truth[i]]
        entry: dict[str, Any] = {"n": len(at), "undefined": len(values) - len(at), "auc": None, "ci95": None}
        if picked and passed:
            stats = compare(
                {name: [values[i] for i in at]}, [truth[i] for i in at], bootstrap=bootstrap, seed=seed, label=name
            )[name]
            entry.update(auc=stats["auc"], ci95=stats["ci95"], tied_pairs=stats["tied_pairs"])
        if picked and name != "both":
            entry["suggestion"] = suggested_threshold(picked, passed, keep)
        scores[name] = entry
    return scores


def _interval(ci: list[float] | None) -> str:
    return "" if ci is None else f" [{ci[0]:.2f}, {ci[1]:.2f}]"


def calibration_text(result: dict[str, Any]) -> str:
    """The ``calibrate`` report as the command prints it."""
    weights = result["weights"]
    lines = [
        f"{result['labelled']} labelled candidates from {result['runs']} pick(s) in {result['source']}: "
        f"{result['picked']} picked, {result['passed_over']} passed over",
        f"agreement with your picks (ROC AUC, 0.5 = chance; 95% bootstrap interval, {result['bootstrap']} resamples):",
    ]
    names = {"cp": "cp", "pf": "pf", "both": f"{weights['cp']:g}*cp + {weights['pf']:g}*pf"}
    for key, entry in result["scores"].items():
        auc = (
            "n/a (needs picked and passed-over candidates with this score)"
            if entry["auc"] is None
            else f"{entry['auc']:.3f}{_interval(entry['ci95'])}"
        )
        undefined = f" ({entry['undefined']} undefined, left out)" if entry["undefined"] else ""
        lines.append(f"  {names[key]:<16} {auc}{undefined}")
    lines.append(f"suggested thresholds (the highest that keeps {result['keep']:.0%} of what you picked):")
    for key in ("cp", "pf"):
        suggestion = result["scores"][key].get("suggestion")
        if suggestion is None:
            lines.append(f"  min_{key}  n/a (no picked candidate has a {key})")
            continue
        passed = suggestion["passed_over"]
        share = f" ({suggestion['passed_over_rejected'] / passed:.0%})" if passed else ""
        lines.append(
            f"  min_{key} {suggestion['threshold']:.3f}: keeps {suggestion['picked_kept']} of {suggestion['picked']} "
            "picked, "
            f"rejects {suggestion['passed_over_rejected']} of {passed} passed over{share}"
        )
    lines.append(
        "  (the picks are taken as independent; candidates of one round are not, so the intervals are optimistic)"
    )
    lines.extend(f"warning: {w}" for w in result["warnings"])
    left_out = left_out_line(result.get("left_out") or {})
    if left_out:
        lines.append(left_out)
    return "\n".join(lines)
