"""MaSC Sample Until's rounds: sample the round's candidates, score them; with pruning, judge the previews first.

One path for every round: a plain round is a round with no judged step. The round itself (phases, who goes on)
is ``masc_core.selection.pruning.run_round``, run by ``host.sampling().sample_round``; the decisions (which step, who
survives, the ledger) live in ``masc_core.selection.pruning``. This converts and scores.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ..masc_core.selection.acceptance import RunRules
from ..masc_core.selection.contact_sheet import thumbnail
from ..masc_core.selection.pruning import CandidateLedger, Ledger, PruneRules, preview_record, pruned_reason, survivors
from .convert import comfy_images


@dataclass
class Kept:
    """A retained candidate's tensors, copied out of its round (a view would keep the whole round alive)."""

    image: torch.Tensor
    latent: torch.Tensor
    mask: torch.Tensor | None


class CandidateRound:
    """One round: sample (with pruning, to each judged step first: score the previews, finish the survivors), score."""

    def __init__(self, sampling, vae, score_round, rules: RunRules, pruning: PruneRules, steps: int, round_index: int):
        self.sampling, self.vae, self.score_round, self.rules, self.pruning = sampling, vae, score_round, rules, pruning
        self.steps, self.round_index = steps, round_index
        self.previews: dict[int, list[dict]] = {}
        self.last_preview: dict[int, tuple] = {}
        self.pruned: dict[int, str] = {}

    def judge(self, step: int, previews, alive: list[int]) -> list[int]:
        images = self.sampling.decode(self.vae, previews)
        arrays = comfy_images(images, "decoded previews")
        batch, _ = self.score_round(arrays)
        for position, j in enumerate(alive):
            score = batch.scores[position]
            self.previews.setdefault(j, []).append(preview_record(step, self.steps, score, self.round_index))
            self.last_preview[j] = (score, thumbnail(arrays[position]), step)
        if self.pruning.study:
            return list(alive)
        passing = self.rules.passing
        chosen = [alive[p] for p in survivors(batch.scores, self.pruning.prune_keep, passing)]
        for position, j in enumerate(alive):
            if j not in chosen:
                self.pruned[j] = pruned_reason(step, self.steps, batch.scores[position], passing)
        return chosen

    def run(self, sample_round, seeds, latent_image, progress, done, ledger: Ledger | None):
        """(round scores in seed order, take(j), pruned {j: why}, thumbnails, a ScoreBatch of the round).

        ``sample_round(seeds, latent, *, progress, done, stops, judge, prunes)`` is the node's way of sampling
        (KSampler's
        inputs or core's custom-sampling ones); both end in the backend's one round (``run_round``).
        """
        judged = self.pruning.active
        result = sample_round(
            seeds,
            latent_image,
            progress=progress,
            done=done,
            stops=self.pruning.stops(self.steps) if judged else (),
            judge=self.judge if judged else None,
            prunes=not self.pruning.study,
        )
        positions, evaluations, replayed = result.positions, result.evaluations, result.replayed
        samples = torch.cat(result.samples) if result.samples else None
        images = self.sampling.decode(self.vae, samples)
        arrays = comfy_images(images, "decoded candidates")
        batch, masks = self.score_round(arrays)
        round_scores, thumbnails = [], []
        for j in range(len(seeds)):
            if j in positions:
                position = positions.index(j)
                round_scores.append(replace(batch.scores[position], previews=self.previews.get(j)))
                thumbnails.append(thumbnail(arrays[position]))
            else:
                preview, picture, _ = self.last_preview[j]
                why = self.pruned[j]
                round_scores.append(
                    replace(
                        preview,
                        cp=None,
                        pf=None,
                        cp_per_reference=[],
                        cp_band=None,
                        pf_band=None,
                        band_notes=[],
                        cp_undefined=why,
                        pf_undefined=why,
                        previews=self.previews.get(j),
                    )
                )
                thumbnails.append(picture)  # its last preview: the contact sheet shows what was judged
        if ledger is not None:
            ledger.add_round(
                [
                    CandidateLedger(
                        index=done + j,
                        previews=self.previews.get(j, []),
                        evaluations=evaluations[j],
                        finished=j in positions,
                        pruned_at=None if j in positions else self.last_preview[j][2],
                        replayed=replayed[j],
                    )
                    for j in range(len(seeds))
                ]
            )

        def take(j):
            p = positions.index(j)
            return Kept(
                images[p : p + 1].clone(),
                samples[p : p + 1].clone(),
                None if masks is None else masks[p : p + 1].clone(),
            )

        return round_scores, take, dict(self.pruned), thumbnails, batch
