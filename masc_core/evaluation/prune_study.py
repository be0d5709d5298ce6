"""``prune-report``: from a study's score log, how far a candidate's preview at each judged step predicts its final
score.

A study (MaSC Sample Until with ``prune_study``) judges every candidate at
several steps and finishes all of them, so each log row holds the previews'
scores (``previews``) beside the final ones. Per judged step this reports:

- Spearman's rho between the preview and the final CP (and PF), over every
  candidate, with a 95% percentile bootstrap interval over candidates;
- per round (the candidates judged together): whether keeping the best
  ``keep`` previews would have kept the final best ``best`` candidates, and
  in how many rounds it would have, with a bootstrap interval over rounds.

The ranking key is the run's (``--by`` cp, pf or both with weights), as
pruning uses it. Rows without previews are ignored; a log without any is
one line. A row MaSC would not write (a run id that is a list, previews
that are not a list of {round, step, steps, cp, pf} with whole-number
steps, a score that is text) is left out and counted in the report. The
bootstrap draws its resamples a block at a time (``agreement.resampled``),
so memory stays bounded however long the log.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from ..errors import MascInputError
from ..selection.pruning import MAX_JUDGED_STEPS, STUDY_FRACTIONS
from ..selection.ranking import ranking_key
from ..metric.scores import ImageScore
from .agreement import (
    DEFAULT_BOOTSTRAP,
    DEFAULT_SEED,
    _interval,
    resampled,
    spearman_rho,
    spearman_resampled,
    stable_seed,
)
from .score_log import left_out_line, log_key, log_score


MAX_PREVIEWS_PER_CANDIDATE = max(len(STUDY_FRACTIONS), MAX_JUDGED_STEPS)
"""The most previews MaSC logs for one candidate: one per judged step (a study's 5, or pruning's at most 63)."""


def _key(cp, pf, by: str, cp_weight: float, pf_weight: float) -> float | None:
    """The ranking key pruning uses (``ranking.ranking_key``) for a logged or previewed cp and pf."""
    return ranking_key(ImageScore(index=0, cp=cp, pf=pf), by, cp_weight, pf_weight)


def _whole(value: Any, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _preview_problem(preview: Any) -> str | None:
    if not isinstance(preview, dict):
        return "a preview is not an object"
    if not _whole(preview.get("steps"), 1) or not _whole(preview.get("step"), 0):
        return "a preview's step or steps is not a whole number (steps at least 1)"
    if preview["step"] > preview["steps"]:
        return "a preview's step is past its steps"
    if not log_key(preview.get("round")):
        return "a preview's round is not a text or whole number"
    if not (log_score(preview.get("cp")) and log_score(preview.get("pf"))):
        return "a preview's cp or pf is not a number"
    return None


def _row_problem(row: dict[str, Any]) -> str | None:
    """Why prune-report cannot use a study row, or None (``_rounds`` has set rows without previews aside)."""
    if not log_key(row.get("run")):
        return "run is not a text or whole number"
    if not (log_score(row.get("cp")) and log_score(row.get("pf"))):
        return "the final cp or pf is not a number"
    if not isinstance(row["previews"], list):
        return "previews is not a list"
    if len(row["previews"]) > MAX_PREVIEWS_PER_CANDIDATE:
        return f"more than the {MAX_PREVIEWS_PER_CANDIDATE} previews MaSC writes for one candidate"
    return next((problem for problem in map(_preview_problem, row["previews"]) if problem), None)


def _rounds(rows: Iterable[dict[str, Any]]) -> tuple[dict[tuple, list[dict[str, Any]]], Counter]:
    """The study's candidates by round (run, round), and how many rows were left out for which reason."""
    grouped: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    left_out: Counter = Counter()
    for row in rows:
        previews = row.get("previews")
        if isinstance(previews, str):  # a CSV cell: not parsed back (use the .jsonl log)
            raise MascInputError(
                "prune-report reads .jsonl score logs (a CSV cell does not keep the previews' structure): log the "
                "study to a .jsonl file"
            )
        if previews is None or previews == [] or row.get("cp") is None and row.get("pf") is None:
            continue
        problem = _row_problem(row)
        if problem:
            left_out[problem] += 1
            continue
        grouped[(row.get("run"), previews[0].get("round"))].append(row)
    return grouped, left_out


@dataclass(frozen=True)
class ReportSettings:
    """What a prune report asks of the study: keep ``keep`` of a round by preview, did that keep the final ``best``;
    the ranking key (``by``, ``cp_weight``, ``pf_weight``); ``bootstrap`` resamples from ``seed``."""

    keep: int = 4
    best: int = 1
    by: str = "cp"
    cp_weight: float = 1.0
    pf_weight: float = 1.0
    bootstrap: int = DEFAULT_BOOTSTRAP
    seed: int = DEFAULT_SEED

    def key(self, cp, pf):
        """The ranking key of a (cp, pf) pair, None when undefined."""
        return _key(cp, pf, self.by, self.cp_weight, self.pf_weight)


def prune_report(rows: Iterable[dict[str, Any]], *, source: str = "the log", **settings) -> dict[str, Any]:
    """Per judged step: rho of preview against final CP and PF, and how often ``keep`` of a round kept its final
    ``best`` (``settings``: the fields of ``ReportSettings``; ``source``: the rows' name in messages)."""
    asked = ReportSettings(**settings)
    keep, best = asked.keep, asked.best
    if best > keep:
        raise MascInputError(
            f"--best {best} is more than --keep {keep}: keeping {keep} can keep at most {keep} of the final best"
        )
    rounds, left_out = _rounds(rows)
    if not rounds:
        also = f" ({left_out_line(left_out)})" if left_out else ""
        raise MascInputError(
            f"{source} holds no candidates with previews and final scores{also}: run MaSC Sample Until with "
            "prune_study on, log its scores to a .jsonl file, then report"
        )
    at_steps = _previews_by_step(rounds)
    return {
        "source": source,
        "rounds": len(rounds),
        "candidates": sum(len(m) for m in rounds.values()),
        "by": asked.by,
        "keep": keep,
        "best": best,
        "bootstrap": asked.bootstrap,
        "seed": asked.seed,
        "steps": [_step_entry(at_steps[at], *at, asked) for at in sorted(at_steps)],
        "left_out": dict(left_out),
    }


def _previews_by_step(rounds: dict[tuple, list[dict[str, Any]]]) -> dict[tuple[int, int], dict[tuple, list]]:
    """Each judged (step, steps): the rounds judged there, each with its (row, preview) pairs; every preview is read
    once (the first of a row at a step counts), so the report is linear in the log."""
    index: dict[tuple[int, int], dict[tuple, list]] = defaultdict(dict)
    for key, members in rounds.items():
        for row in members:
            seen = set()
            for preview in row["previews"]:
                at = (preview["step"], preview["steps"])
                if at not in seen:
                    seen.add(at)
                    index[at].setdefault(key, []).append((row, preview))
    return index


def _step_entry(rounds: dict[tuple, list], step: int, total: int, asked: ReportSettings) -> dict[str, Any]:
    """One judged step's rows of the report: rho of preview against final CP and PF (with bootstrap intervals) and
    how often keeping ``keep`` of a round by its preview kept the round's final ``best``."""
    keep, best, bootstrap = asked.keep, asked.best, asked.bootstrap
    pairs = {"cp": ([], []), "pf": ([], [])}
    kept_best, considered, sizes = [], 0, []
    for at in rounds.values():
        for row, p in at:
            for name in ("cp", "pf"):
                if row.get(name) is not None and p.get(name) is not None:
                    pairs[name][0].append(p[name])
                    pairs[name][1].append(row[name])
        finals = [
            (
                row,
                asked.key(row.get("cp"), row.get("pf")),
                asked.key(p.get("cp"), p.get("pf")),
            )
            for row, p in at
        ]
        finals = [f for f in finals if f[1] is not None and f[2] is not None]
        if len(finals) <= keep:
            continue  # keeping this many prunes nothing in this round
        considered += 1
        sizes.append(len(finals))
        final_best = {id(f[0]) for f in sorted(finals, key=lambda f: -f[1])[:best]}
        preview_kept = {id(f[0]) for f in sorted(finals, key=lambda f: -f[2])[:keep]}
        kept_best.append(final_best <= preview_kept)
    entry: dict[str, Any] = {
        "step": step,
        "steps": total,
        "fraction": step / total,
        "rounds": considered,
        "round_size": int(np.median(sizes)) if sizes else None,
    }
    rng = np.random.default_rng(stable_seed(asked.seed, f"step {step}/{total}"))
    for name, (preview, final) in pairs.items():
        rho = spearman_rho(preview, final) if len(preview) >= 3 else None
        ci = None
        if rho is not None and bootstrap > 0:
            x, y = np.asarray(preview, dtype=np.float64), np.asarray(final, dtype=np.float64)
            ci = _interval(resampled(rng, x.size, bootstrap, lambda draws: spearman_resampled(x, y, draws)))
        entry[f"rho_{name}"] = {"n": len(preview), "rho": rho, "ci95": ci}
    if considered:
        hits = np.asarray(kept_best, dtype=np.float64)
        ci = (
            _interval(resampled(rng, hits.size, bootstrap, lambda draws: hits[draws].mean(axis=1)))
            if bootstrap > 0 and hits.size > 1
            else None
        )
        entry["kept_best"] = {
            "keep": keep,
            "best": best,
            "hits": int(hits.sum()),
            "rounds": considered,
            "rate": float(hits.mean()),
            "ci95": ci,
        }
    else:
        entry["kept_best"] = None
    return entry


def _ci(ci) -> str:
    return "" if not ci else f" [{ci[0]:+.2f}, {ci[1]:+.2f}]"


def prune_report_text(result: dict[str, Any]) -> str:
    lines = [
        f"{result['candidates']} candidates in {result['rounds']} rounds of {result['source']} (ranked by "
        f"{result['by']})",
        "step       rho CP (preview vs final)    rho PF                       keeping the best",
    ]
    for entry in result["steps"]:
        rho = []
        for name in ("cp", "pf"):
            figure = entry[f"rho_{name}"]
            rho.append(
                "n/a" if figure["rho"] is None else f"{figure['rho']:+.2f}{_ci(figure['ci95'])} (n {figure['n']})"
            )
        kept = entry["kept_best"]
        if kept is None:
            kept_text = f"n/a (no round has more than {result['keep']} candidates)"
        else:
            interval = "" if not kept["ci95"] else f" [{kept['ci95'][0]:.0%}, {kept['ci95'][1]:.0%}]"
            kept_text = (
                f"{kept['keep']} of {entry['round_size']} kept the final best {kept['best']} in {kept['hits']} of "
                f"{kept['rounds']} rounds ({kept['rate']:.0%}{interval})"
            )
        where = f"{entry['step']}/{entry['steps']} ({entry['fraction']:.0%})"
        lines.append(f"{where:<10} {rho[0]:<28} {rho[1]:<28} {kept_text}")
    lines.append(
        "prune_at is safe where rho is high and keeping prune_keep kept the final best in (nearly) every round; "
        "the intervals take candidates (rho) and rounds (kept) as independent"
    )
    left_out = left_out_line(result.get("left_out") or {})
    if left_out:
        lines.append(left_out)
    return "\n".join(lines)
