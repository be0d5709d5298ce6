"""Both Sample Until nodes on a video latent (5-D, as core's Wan nodes make it), without ComfyUI: each candidate is a
clip, scored as MaSC Score Video scores it and judged by its worst frame; MaSC Video Options cuts the reference frames
before decoding. The real Wan VACE run is in tests/host/test_video.py."""

from __future__ import annotations

import importlib

import pytest
import torch

from comfy_harness import StandInVAE, stand_in_sampling
from test_sample_until import PROMPT, SUBJECT, float_image, models  # noqa: F401 (models: a fixture)
from test_sample_until_custom import custom_inputs

LATENT_FRAMES = 4


def video_options(pack, trim_latent=1, every_nth_frame=1, max_frames=32):
    node = pack.nodes.NODE_CLASS_MAPPINGS["MaSCVideoOptions"]()
    return node.options(trim_latent, every_nth_frame, max_frames)[0]


def video_inputs(pack, models, video, **changes):
    values = custom_inputs(pack, models, **changes)
    values.update(latent_image={"samples": torch.zeros(1, 4, LATENT_FRAMES, 16, 16)}, vae=StandInVAE(), video=video)
    return values


def run_video(pack, models, video, **changes):
    values = video_inputs(pack, models, video, **changes)
    with stand_in_sampling(pack):
        return pack.nodes.NODE_CLASS_MAPPINGS["MaSCSampleUntilCustom"]().sample(**values), values


def test_video_candidates_are_clips_scored_as_masc_score_video_scores_them(pack, models):
    out, values = run_video(pack, models, video_options(pack, trim_latent=1), accept=2, max_candidates=4)
    images, latent, mask, scores, used, seeds, report, candidates = out["result"]
    clip_frames = LATENT_FRAMES - 1  # the stand-in VAE: one frame per latent frame; the first cut
    assert used == 2 and tuple(images.shape) == (2 * clip_frames, 128, 128, 3)  # two kept clips, frame after frame
    assert tuple(latent["samples"].shape) == (2, 4, LATENT_FRAMES, 16, 16)  # as sampled, untrimmed (as KSampler's)
    row = scores.scores[0]
    assert row.clip["total_frames"] == clip_frames and [f["frame"] for f in row.clip["frames"]] == [0, 1, 2]
    assert row.cp == pytest.approx(min(f["cp"] for f in row.clip["frames"]))
    # The first kept clip scored by MaSC Score Video: the same per-frame CP, so the same worst frame.
    kept = scores.context.kept[0]
    frames = images[:clip_frames]
    video = pack.nodes.NODE_CLASS_MAPPINGS["MaSCScoreVideo"]().score(
        values["encoder"], values["reference_image"], values["reference_mask"], frames, PROMPT, SUBJECT
    )
    per_frame = [s.cp for s in video["result"][5].scores]
    assert per_frame == pytest.approx([f["cp"] for f in scores.scores[kept].clip["frames"]], abs=1e-6)
    assert video["result"][2] == pytest.approx(scores.scores[kept].cp, abs=1e-6)
    assert candidates.shape[0] == 2  # one thumbnail per candidate: its worst frame


def test_without_video_options_a_video_latent_scores_every_frame(pack, models):
    out, _ = run_video(pack, models, None, accept=1, max_candidates=2)
    images, scores = out["result"][0], out["result"][3]
    assert images.shape[0] == LATENT_FRAMES and scores.scores[0].clip["total_frames"] == LATENT_FRAMES


@pytest.mark.parametrize(
    "latent, video, message",
    [
        (torch.zeros(1, 4, 32, 32), dict(trim_latent=1), "video is connected but latent_image is an image latent"),
        (torch.zeros(1, 4, LATENT_FRAMES, 16, 16), dict(trim_latent=4), "trim_latent is 4 but the latent has 4"),
    ],
)
def test_video_settings_that_cannot_apply_are_one_line_before_sampling(pack, models, latent, video, message):
    errors = importlib.import_module(pack.__name__ + ".masc_core.errors")
    values = video_inputs(pack, models, video_options(pack, **video))
    values["latent_image"] = {"samples": latent}
    with stand_in_sampling(pack) as backend:
        with pytest.raises(errors.MascInputError, match=message):
            pack.nodes.NODE_CLASS_MAPPINGS["MaSCSampleUntilCustom"]().sample(**values)
    assert backend.calls == []


def test_video_options_out_of_range_are_refused_by_the_node(pack):
    errors = importlib.import_module(pack.__name__ + ".masc_core.errors")
    with pytest.raises(errors.MascInputError, match="max_frames is 0"):
        video_options(pack, max_frames=0)
    assert video_options(pack, trim_latent=2).trim_latent == 2


def test_pruning_judges_video_previews_and_finishes_the_survivors(pack, models):
    from test_sample_until_custom import make_prune

    out, _ = run_video(
        pack,
        models,
        video_options(pack, trim_latent=1),
        steps=4,
        batch_size=4,
        accept=1,
        max_candidates=4,
        min_cp=1.0,
        prune=make_prune(pack, prune_at=0.5, prune_keep=1),
    )
    scores, report = out["result"][3], out["result"][6]
    ledger = scores.context.ledger
    assert ledger is not None and "pruning at step 2 of 4" in report
    pruned = [s for s in scores.scores if s.cp is None]
    assert len(pruned) == 3 and all(s.previews and s.previews[0]["cp"] is not None for s in pruned)
    finished = [s for s in scores.scores if s.cp is not None]
    assert len(finished) == 1 and finished[0].clip["total_frames"] == LATENT_FRAMES - 1


def test_several_subjects_on_a_video_latent_are_refused_before_the_first_step(pack, models):
    from test_sample_until_subjects import declare

    errors = importlib.import_module(pack.__name__ + ".masc_core.errors")
    values = video_inputs(pack, models, None)
    values.update(
        reference_image=None,
        reference_mask=None,
        subject="",
        mask_subject="",
        subjects=declare(pack, "teapot", "teapot_00", declare(pack, "dog", "dog_00")),
    )
    with stand_in_sampling(pack) as backend:
        with pytest.raises(errors.MascInputError, match="several subjects in a video are not scored yet"):
            pack.nodes.NODE_CLASS_MAPPINGS["MaSCSampleUntilCustom"]().sample(**values)
    assert backend.calls == []  # not one step sampled, nothing decoded
