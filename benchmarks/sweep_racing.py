"""Benchmark: does racing reach the full grid's verdict with fewer generations? (``masc_core.selection.sweep``)

``python -m benchmarks sweep-racing`` builds stand-in sweeps, deterministic from ``--seed``: a grid of the baseline
and LoRA cells, each cell's (CP, PF) at each (prompt, seed) drawn as its true means plus a per-pair effect shared by
every cell (what a prompt or a seed does to all of them: the reason the design is paired) plus the cell's own noise.
Two grids:

- **clear**: one cell is clearly best (its CP mean 0.08 above the next, PF within the margin);
- **ties**: every cell has the same means (the data cannot separate them).

For each it runs the whole grid (every cell at every pair) and the race (``SweepRace``: a round is one seed over
every prompt, for the live cells), and reports the generations each spent and whether their recommendations agree.
No model is run: a generation here is one (cell, prompt, seed) the race asked for.
"""

from __future__ import annotations

import argparse

import numpy as np

from .output import set_command

GRIDS = {
    # cell -> (true CP mean, true PF mean)
    "clear": {
        "baseline": (0.30, 0.200),
        "epoch04 @ 0.6": (0.38, 0.195),
        "epoch04 @ 1.0": (0.42, 0.190),
        "epoch08 @ 0.6": (0.44, 0.190),
        "epoch08 @ 1.0": (0.52, 0.188),
        "epoch12 @ 0.6": (0.44, 0.150),
        "epoch12 @ 1.0": (0.46, 0.120),
    },
    "ties": {name: (0.45, 0.19) for name in ("baseline", "a @ 0.6", "a @ 1.0", "b @ 0.6", "b @ 1.0")},
}


def stand_in_scores(means: dict, prompts: int, seeds: int, seed: int, noise: float = 0.04) -> dict:
    """cell -> (prompt, seed) -> (cp, pf): each pair's shared effect plus the cell's own noise, deterministic."""
    rng = np.random.default_rng(seed)
    pairs = [(f"prompt {p}", s) for s in range(seeds) for p in range(prompts)]
    shared = {pair: rng.normal(0.0, 0.06, size=2) for pair in pairs}
    scores = {}
    for name, (cp, pf) in means.items():
        own = np.random.default_rng([seed, sum(map(ord, name))])
        scores[name] = {
            pair: (
                float(np.clip(cp + shared[pair][0] + own.normal(0.0, noise), -1, 1)),
                float(np.clip(pf + shared[pair][1] / 3 + own.normal(0.0, noise / 4), -1, 1)),
            )
            for pair in pairs
        }
    return scores


def cells_of(means: dict) -> list:
    from masc_core.selection.sweep import SweepCell

    cells = []
    for order, name in enumerate(means):
        strength = 0.0 if name == "baseline" else float(name.rsplit("@", 1)[1])
        cells.append(SweepCell(name, baseline=name == "baseline", weakness=(strength, order)))
    return cells


def run_grid(name: str, prompts: int, seeds: int, seed: int) -> dict:
    """The full grid's verdict and the race's, on the same stand-in scores."""
    from masc_core.selection.sweep import SweepRace, SweepRule, sweep_verdict

    means = GRIDS[name]
    cells, scores, rule = cells_of(means), stand_in_scores(means, prompts, seeds, seed), SweepRule(seed=seed)
    full = sweep_verdict(cells, scores, rule)
    race = SweepRace(cells, rule, rounds=seeds)
    for round_index in range(seeds):
        race.observe(
            round_index,
            {cell: {p: v for p, v in scores[cell].items() if p[1] == round_index} for cell in race.live},
        )
    raced = race.verdict()
    return {
        "grid": name,
        "cells": len(cells),
        "prompts": prompts,
        "seeds": seeds,
        "full_images": full.images,
        "race_images": raced.images,
        "share": raced.images / full.images,
        "full_recommended": full.recommended,
        "race_recommended": raced.recommended,
        "full_tied": full.tied,
        "race_tied": raced.tied,
        "agree": full.recommended == raced.recommended,
        "stopped": race.stopped,
    }


def measure(args: argparse.Namespace) -> list:
    return [run_grid(name, args.prompts, args.seeds, args.seed) for name in GRIDS]


def table(results: list) -> str:
    lines = ["grid    cells  full images  race images  share  same recommendation  recommended (race)"]
    for r in results:
        lines.append(
            f"{r['grid']:<6}  {r['cells']:>5}  {r['full_images']:>11}  {r['race_images']:>11}  {r['share']:>5.2f}"
            f"  {'yes' if r['agree'] else 'NO':>19}  {r['race_recommended']}"
        )
    return "\n".join(lines)


def add_parser(commands) -> None:
    parser = commands.add_parser(
        "sweep-racing", help="racing against the full grid on stand-in sweeps: generations spent, same verdict"
    )
    parser.add_argument("--prompts", type=int, default=4, help="prompts per sweep (default 4)")
    parser.add_argument("--seeds", type=int, default=8, help="seeds per prompt, one round each (default 8)")
    parser.add_argument("--seed", type=int, default=0, help="the stand-in scores' seed (default 0)")
    set_command(parser, measure, table)
