"""The Sample Until run as a library (masc_core.scoring.candidates.run_sample_until), with no ComfyUI at all.

A host fills ``CandidateSampler``; here a sampler whose "latent" for a seed is a real photo (the reference itself for
some seeds, other subjects for the rest) and whose decode is the identity. The scoring is the real one (a
random-weight SigLIP2 loaded through the real loader): a candidate identical to the reference has CP 1 to float
precision, any other photo less, so the run's decisions are known in advance while every line of the metric runs.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import box_mask, load_photo
from masc_core.errors import MascInputError
from masc_core.metric.scores import ScoreContext
from masc_core.scoring.candidates import CandidateScoring, run_sample_until
from masc_core.selection.acceptance import RunRules
from masc_core.selection.pruning import PruneRules, RoundResult
from masc_core.selection.ranking import PassRules

SIZE = 96
REFERENCE = "dog_00"
OTHERS = ["cat_00", "backpack_00", "duck_toy_00"]


def _photo(name: str) -> torch.Tensor:
    """A photo as a [1, H, W, 3] float image, square SIZE."""
    from PIL import Image

    image = Image.fromarray(load_photo(name)).resize((SIZE, SIZE))
    return torch.from_numpy(np.asarray(image, dtype=np.float32) / 255.0)[None]


class Hosted:
    """A hosted model as a host gives it: ``ready()`` returns the model on its device."""

    def __init__(self, model):
        self.model = model

    def ready(self):
        return self.model


class PhotoSampler:
    """A ``CandidateSampler``: seed -> the reference photo when ``seed in matches``, else another subject's photo.

    A judged round calls ``judge`` at each stop with every live candidate's "preview" (its photo: the preview already
    shows what the candidate becomes) and finishes only the survivors, as the host's ``run_round`` does."""

    steps, label, known, batches, denoise, clips = 10, "euler", True, True, 1.0, False

    def __init__(self, matches):
        self.matches = set(matches)
        self.events: list = []

    def photo(self, seed: int) -> torch.Tensor:
        return _photo(REFERENCE if seed in self.matches else OTHERS[seed % len(OTHERS)])

    def start(self, budget):
        self.events.append(("start", budget))

    def check_interrupt(self):
        self.events.append(("interrupt check",))

    def show_round(self, news):
        self.events.append(("news", news.text.splitlines()[1:], news.picture is not None))

    def decode(self, samples):
        return samples

    def sample_round(self, seeds, *, done, stops, judge, prunes):
        self.events.append(("round", list(seeds), list(stops)))
        alive = list(range(len(seeds)))
        evaluations = [0] * len(seeds)
        for stop in stops:
            for j in alive:
                evaluations[j] = stop
            previews = torch.cat([self.photo(seeds[j]) for j in alive])
            alive = judge(stop, previews, alive) if prunes else alive
        for j in alive:
            evaluations[j] = self.steps
        return RoundResult(
            positions=alive,
            samples=[self.photo(seeds[j]) for j in alive],
            evaluations=evaluations,
            replayed=[0] * len(seeds),
        )


@pytest.fixture(scope="module")
def scoring(naflex_encoder):
    reference = (_photo(REFERENCE)[0].numpy() * 255).round().astype(np.uint8)
    return CandidateScoring(
        encoder=Hosted(naflex_encoder),
        prompt="a photo of a dog",
        references=[reference],
        reference_masks=[box_mask(SIZE, SIZE, dtype=np.float32)],
        subject="dog",
    )


def cp_rules(**changes) -> RunRules:
    fields = dict(passing=PassRules(by="cp", min_cp=0.999), accept=1, max_candidates=8, batch_size=2, seed=100)
    return RunRules(**{**fields, **changes})


def test_the_run_stops_at_the_first_round_with_a_passing_candidate_and_keeps_it(scoring):
    sampler = PhotoSampler(matches={103})
    finished = run_sample_until(cp_rules(), PruneRules(), sampler, scoring, context=ScoreContext(node="test"))
    outcome = finished.result.outcome
    assert [c.seed for c in outcome.candidates] == [100, 101, 102, 103] and outcome.used == 4
    assert [c.seed for c, _ in outcome.kept] == [103] and outcome.seeds == [103]
    assert finished.scores.cp[3] == pytest.approx(1.0, abs=1e-5) and max(finished.scores.cp[:3]) < 0.999
    assert finished.scores.context.node == "test" and finished.scores.context.seeds == [100, 101, 102, 103]
    assert finished.scores.context.kept == [3] and finished.scores.context.verdicts[3] == "accepted"
    # The host was told the budget once, asked about interrupts before each round and shown each round's news.
    assert sampler.events[0] == ("start", 8)
    assert [e[0] for e in sampler.events[1:]] == ["interrupt check", "round", "news"] * 2
    last_news = sampler.events[-1]
    assert last_news[1][1].startswith("#3 seed 103: CP +1.0000") and last_news[1][1].endswith("passes")
    assert len(finished.result.thumbnails) == 4
    assert "accept 1 of at most 8, 2 per round" in finished.report


def test_pruning_judges_the_previews_and_finishes_only_the_survivor(scoring):
    sampler = PhotoSampler(matches={101, 105})
    rules = cp_rules(accept=2, max_candidates=8, batch_size=2)
    finished = run_sample_until(rules, PruneRules(prune_at=0.4, prune_keep=1), sampler, scoring, context=ScoreContext())
    outcome = finished.result.outcome
    assert [e[1:] for e in sampler.events if e[0] == "round"] == [
        ([100, 101], [4]),
        ([102, 103], [4]),
        ([104, 105], [4]),
    ]
    assert outcome.seeds == [101, 105]
    pruned = [c for c in outcome.candidates if c.pruned]
    assert [c.seed for c in pruned] == [100, 102, 104]  # the other subjects, judged on their previews
    ledger = finished.scores.context.ledger
    assert ledger is not None and "pruning at step 4 of 10, 1 of each round of 2 go on" in finished.report


@pytest.mark.parametrize(
    "rules,message",
    [
        (cp_rules(accept=9), "accept is 9 but max_candidates is 8"),
        (cp_rules(passing=PassRules(by="pf")), "rank_by 'pf' needs the candidates' masks"),
        (cp_rules(passing=PassRules(by="cp", on_blend="reject")), "on_blend is 'reject' but 'subjects' is not"),
        (cp_rules(seed=2**64 - 3), "seed 18446744073709551613 is outside"),
    ],
)
def test_every_check_comes_before_the_first_candidate(scoring, rules, message):
    sampler = PhotoSampler(matches=())
    with pytest.raises(MascInputError, match="^" + message.replace("(", r"\(")):
        run_sample_until(rules, PruneRules(), sampler, scoring, context=ScoreContext())
    assert sampler.events == []


def test_pruning_settings_a_round_cannot_follow_are_refused_before_sampling(scoring):
    sampler = PhotoSampler(matches=())
    with pytest.raises(MascInputError, match="^prune_keep 2 keeps the whole round"):
        run_sample_until(cp_rules(), PruneRules(prune_at=0.4, prune_keep=2), sampler, scoring, context=ScoreContext())
    assert sampler.events == []


def test_the_budgets_thumbnails_hold_a_bounded_number_of_pixels():
    from masc_core.selection.contact_sheet import CANDIDATE_PIXELS, THUMBNAIL, thumbnail_side

    assert [thumbnail_side(b) for b in (1, 16, 32, 33, 64, 128, 256, 4096)] == [256, 256, 256, 252, 181, 128, 90, 22]
    for budget in range(1, 4097):
        side = thumbnail_side(budget)
        assert side <= THUMBNAIL and budget * side * side <= CANDIDATE_PIXELS, budget


def test_a_large_budget_keeps_small_thumbnails(scoring):
    sampler = PhotoSampler(matches={101})
    finished = run_sample_until(cp_rules(max_candidates=4096), PruneRules(), sampler, scoring, context=ScoreContext())
    assert finished.result.outcome.used == 2
    assert [t.shape for t in finished.result.thumbnails] == [(22, 22, 3)] * 2
    assert finished.result.outcome.kept[0][1].image.shape == (1, SIZE, SIZE, 3)  # the kept image itself: full size


def test_each_round_hands_its_freed_memory_back(scoring, monkeypatch):
    import masc_core.selection.sample_until as run_module

    trims = []
    monkeypatch.setattr(run_module, "release_freed_memory", lambda: trims.append(len(sampler.events)) or True)
    sampler = PhotoSampler(matches={105})
    run_sample_until(cp_rules(), PruneRules(), sampler, scoring, context=ScoreContext())
    # After each of the three rounds' news, before the next round starts.
    assert trims == [4, 7, 10] and [sampler.events[n - 1][0] for n in trims] == ["news"] * 3


# ------------------------------------------------------------------ video candidates: the same run, a clip each

FRAMES = 6


class ClipSampler(PhotoSampler):
    """Seed -> a clip [1, T, H, W, 3] (a video latent decoded): all reference frames for ``matches``, the reference
    with frames 2 and 3 of another subject for ``turning``, another subject throughout for the rest."""

    def __init__(self, matches, turning=()):
        super().__init__(matches)
        self.turning = set(turning)

    def photo(self, seed: int) -> torch.Tensor:
        reference, other = _photo(REFERENCE)[0], _photo(OTHERS[seed % len(OTHERS)])[0]
        if seed in self.matches:
            frames = [reference] * FRAMES
        elif seed in self.turning:
            frames = [other if t in (2, 3) else reference for t in range(FRAMES)]
        else:
            frames = [other] * FRAMES
        return torch.stack(frames)[None]


def test_video_candidates_are_judged_by_their_worst_frame_and_kept_whole(scoring):
    sampler = ClipSampler(matches={103}, turning={101})
    finished = run_sample_until(cp_rules(), PruneRules(), sampler, scoring, context=ScoreContext())
    outcome = finished.result.outcome
    assert outcome.seeds == [103] and outcome.used == 4
    turning = finished.scores.scores[1]
    assert turning.clip["failing_frames"] == [2, 3] and turning.clip["worst_frame"] in (2, 3)
    assert turning.cp == pytest.approx(turning.clip["worst_cp"]) and turning.cp < turning.clip["cp"]
    assert [f["frame"] for f in turning.clip["frames"]] == list(range(FRAMES))
    kept = outcome.kept[0][1]
    assert tuple(kept.image.shape) == (1, FRAMES, SIZE, SIZE, 3)  # the whole clip, every frame
    assert finished.scores.cp[3] == pytest.approx(1.0, abs=1e-5)
    # The thumbnail of the turning clip is its worst frame (another subject), not its first (the reference).
    worst = (_photo(OTHERS[101 % len(OTHERS)])[0].numpy() * 255).round().astype(np.uint8)
    assert np.abs(finished.result.thumbnails[1].astype(int) - worst.astype(int)).mean() < 1.0


def test_pruning_judges_a_few_frames_of_each_video_preview(scoring):
    from masc_core.selection import clip as clip_module

    sampler = ClipSampler(matches={101, 105})
    rules = cp_rules(accept=2, max_candidates=8, batch_size=2)
    finished = run_sample_until(rules, PruneRules(prune_at=0.4, prune_keep=1), sampler, scoring, context=ScoreContext())
    outcome = finished.result.outcome
    assert outcome.seeds == [101, 105] and [c.seed for c in outcome.candidates if c.pruned] == [100, 102, 104]
    judged = [c.score.previews[0] for c in outcome.candidates if c.pruned]
    assert all(p["cp"] is not None and p["cp"] < 0.999 for p in judged)
    assert clip_module.PREVIEW_FRAMES == 4  # what docs/video.md says a judged step scores
