"""Batch API: one reference against N outputs equals one-by-one; the content cache; multi-reference CP."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import PROMPT, box_mask, load_photo
from masc_core import MascEncoder, score_images


def outputs_of_several_aspect_ratios():
    dog = load_photo("dog_01")
    return [load_photo("dog_02"), dog[:300], dog[:, 100:400], load_photo("cat_00"), dog[13:500, 7:333]]


def test_batch_equals_one_by_one(encoder):
    ref = load_photo("dog_00")
    ref_mask = box_mask(512, 512)
    outs = outputs_of_several_aspect_ratios()
    masks = [box_mask(*o.shape[:2], 0.2, 0.2, 0.7, 0.8) for o in outs]
    prompts = [PROMPT, "a dog in the snow", PROMPT, "the dog with a hat", ""]
    encoder.clear_cache()
    batch = score_images(
        encoder, outs, reference=ref, reference_mask=ref_mask, mask=masks, prompt=prompts, subject="dog"
    )
    for i, (out, m, p) in enumerate(zip(outs, masks, prompts)):
        encoder.clear_cache()
        single = score_images(encoder, out, reference=ref, reference_mask=ref_mask, mask=m, prompt=p, subject="dog")
        assert batch.scores[i].cp == pytest.approx(single.scores[0].cp, abs=1e-6)
        assert batch.scores[i].pf == pytest.approx(single.scores[0].pf, abs=1e-6)
        assert batch.scores[i].encoded_prompt == single.scores[0].encoded_prompt


def test_forward_counts_reach_the_floor_and_the_cache_skips_repeats(naflex_dir):
    encoder = MascEncoder.load(naflex_dir, device="cpu", batch_size=3)
    ref = load_photo("dog_00")
    outs = outputs_of_several_aspect_ratios()
    kwargs = dict(reference=ref, reference_mask=box_mask(512, 512), mask=box_mask(64, 64), subject="dog")
    score_images(encoder, outs, prompt=PROMPT, **kwargs)
    # N outputs + 1 reference vision forwards, 1 text forward.
    assert encoder.forward_counts == {"images": len(outs) + 1, "texts": 1}
    # Same reference and outputs, another prompt: no vision forward, one text forward.
    again = score_images(encoder, outs, prompt="a dog in the snow", **kwargs)
    assert encoder.forward_counts == {"images": len(outs) + 1, "texts": 2}
    assert all(s.pf is not None for s in again.scores)
    # Same prompt after stripping ("a dog in the snow" and "the dog in the snow" both give "in the snow").
    score_images(encoder, outs[:1], prompt="the dog in the snow", **kwargs)
    assert encoder.forward_counts == {"images": len(outs) + 1, "texts": 2}
    # A repeated image inside one call is encoded once.
    encoder.clear_cache()
    score_images(encoder, [outs[0], outs[0], outs[0]], prompt=PROMPT, **kwargs)
    assert encoder.forward_counts["images"] == len(outs) + 1 + 2


def test_cache_memory_is_bounded(naflex_dir):
    one_image_bytes = 1024 * 64 * 4  # 1024 patches x 64 dims x fp32 (tiny model)
    encoder = MascEncoder.load(naflex_dir, device="cpu", cache_bytes=2 * one_image_bytes)
    outs = outputs_of_several_aspect_ratios()
    encoder.encode_images(outs)
    assert encoder.image_cache.nbytes <= 2 * one_image_bytes
    assert len(encoder.image_cache) == 2
    disabled = MascEncoder.load(naflex_dir, device="cpu", cache_bytes=0)
    disabled.encode_images(outs[:2])
    disabled.encode_images(outs[:2])
    assert disabled.forward_counts["images"] == 4 and len(disabled.image_cache) == 0


def test_outputs_scored_once_can_stay_out_of_the_cache(naflex_dir):
    """A sampling loop's candidates are seen once: kept out of the cache, they cannot push the reference out."""
    encoder = MascEncoder.load(naflex_dir, device="cpu")
    ref = load_photo("dog_00")
    outs = outputs_of_several_aspect_ratios()
    kwargs = dict(reference=ref, reference_mask=box_mask(512, 512), mask=box_mask(64, 64), prompt=PROMPT, subject="dog")
    cached = score_images(encoder, outs[:2], **kwargs)
    encoder.clear_cache()
    encoder.reset_forward_counts()
    for out in outs[:2]:
        uncached = score_images(encoder, [out], cache_outputs=False, **kwargs)
        assert len(encoder.image_cache) == 1  # the reference only
    assert encoder.forward_counts == {"images": 3, "texts": 1}  # the reference and the prompt encoded once
    assert uncached.scores[0].cp == pytest.approx(cached.scores[1].cp, abs=1e-6)
    assert uncached.scores[0].pf == pytest.approx(cached.scores[1].pf, abs=1e-6)


def test_several_references_average_per_reference_cp(encoder):
    views = [load_photo("dog_00"), load_photo("dog_02")[50:450]]
    view_masks = [box_mask(*v.shape[:2]) for v in views]
    outs = [load_photo("dog_01"), load_photo("cat_00")]
    both = score_images(encoder, outs, reference=views, reference_mask=view_masks, pf=False)
    for k in range(2):
        alone = score_images(encoder, outs, reference=views[k], reference_mask=view_masks[k], pf=False)
        for i in range(2):
            assert both.scores[i].cp_per_reference[k] == pytest.approx(alone.scores[i].cp, abs=1e-6)
    for score in both.scores:
        assert score.cp == pytest.approx(np.mean(score.cp_per_reference), abs=1e-7)
    # A view whose mask is empty is left out of the mean and reported as None.
    partial = score_images(encoder, outs, reference=views, reference_mask=[view_masks[0], np.zeros((8, 8))], pf=False)
    assert partial.scores[0].cp_per_reference[1] is None
    assert partial.scores[0].cp == pytest.approx(both.scores[0].cp_per_reference[0], abs=1e-6)


def test_progress_reports_every_batch(naflex_dir):
    encoder = MascEncoder.load(naflex_dir, device="cpu", batch_size=2)
    seen = []
    score_images(
        encoder,
        outputs_of_several_aspect_ratios(),
        reference=load_photo("dog_00"),
        reference_mask=box_mask(64, 64),
        pf=False,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert seen == [(2, 6), (4, 6), (6, 6)]


def test_batches_are_even_and_group_similar_lengths():
    from masc_core.models.encoder import plan_batches

    assert [len(b) for b in plan_batches([1024] * 9, 8)] == [5, 4]
    assert [len(b) for b in plan_batches([1024] * 33, 8)] == [7, 7, 7, 7, 5]
    assert plan_batches([], 8) == []
    batches = plan_batches([100, 900, 120, 880], 2)
    assert batches == [[1, 3], [2, 0]]  # long with long, short with short
    assert sorted(i for b in plan_batches(list(range(50)), 7) for i in b) == list(range(50))
