"""Several subjects in one image (score_subjects): K = 1 is single-subject MaSC, exclusivity, the region matrix and
blend warnings on composites of real photos, PF with the union mask, bad input in one line."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from masc_core import MascInputError, Subject, score_images, score_subjects
from masc_core.metric.subjects import MAX_SUBJECTS, blend_warnings, summarize

from conftest import box_mask, load_photo

PROMPT = "a photo of sks dog and a cat on the sofa"
SIDE = 224


def _photo(name: str, side: int = SIDE) -> np.ndarray:
    return np.asarray(Image.fromarray(load_photo(name)).resize((side, side), Image.BICUBIC))


def _pair(left: str, right: str) -> np.ndarray:
    """Two photos side by side: [SIDE, 2*SIDE, 3]."""
    return np.concatenate([_photo(left), _photo(right)], axis=1)


def _half(which: str) -> np.ndarray:
    """The subject's box inside the left or the right half of a pair."""
    mask = np.zeros((SIDE, 2 * SIDE), dtype=np.uint8)
    box = box_mask(SIDE, SIDE, top=0.1, left=0.1, bottom=0.9, right=0.9)
    mask[:, :SIDE] = box if which == "left" else 0
    mask[:, SIDE:] = box if which == "right" else 0
    return mask


DOG = Subject("sks dog, dog", _photo("dog_00"), box_mask(SIDE, SIDE, 0.1, 0.1, 0.9, 0.9))
CAT = Subject("cat", _photo("cat_00"), box_mask(SIDE, SIDE, 0.1, 0.1, 0.9, 0.9))


def test_one_subject_gives_single_subject_masc_number_for_number(encoder):
    outputs = [_photo("dog_01"), _photo("dog_02"), _photo("cat_01")]
    masks = [box_mask(SIDE, SIDE, 0.2, 0.2, 0.8, 0.8)] * 3
    views = [_photo("dog_00"), _photo("dog_02")]
    view_masks = [box_mask(SIDE, SIDE, 0.1, 0.1, 0.9, 0.9), box_mask(SIDE, SIDE, 0.2, 0.1, 0.9, 0.8)]
    single = score_images(
        encoder, outputs, reference=views, reference_mask=view_masks, mask=masks, prompt=PROMPT, subject="sks dog, dog"
    )
    multi = score_subjects(
        encoder, outputs, subjects=[Subject("sks dog, dog", views, view_masks)], output_masks=[masks], prompt=PROMPT
    )
    for one, many in zip(single.scores, multi.scores):
        assert many.cp_min == many.cp_mean == many.subjects[0].cp == one.cp
        assert many.subjects[0].cp_per_reference == one.cp_per_reference
        assert many.pf == one.pf and many.encoded_prompt == one.encoded_prompt == "a photo of and a cat on the sofa"
        # R[0][0] searches only the subject's own region: at most CP, which searches the whole output.
        assert many.region_matrix[0][0] <= one.cp and many.blends == [] and not many.exclusive
        assert many.background_patches == one.background_patches
    assert [info.references for info in multi.subjects] == [single.references]


def test_k_subjects_cost_one_forward_per_distinct_view_and_output_and_one_text_forward(naflex_dir):
    from masc_core import MascEncoder

    encoder = MascEncoder.load(naflex_dir, device="cpu")
    outputs = [_pair("dog_01", "cat_01"), _pair("cat_01", "dog_02")]
    score_subjects(
        encoder,
        outputs,
        subjects=[DOG, CAT],
        output_masks=[[_half("left"), _half("right")], [_half("right"), _half("left")]],
        prompt=PROMPT,
    )
    assert encoder.forward_counts == {"images": 2 + len(outputs), "texts": 1}


def test_permuting_the_subjects_permutes_every_figure_and_keeps_the_summaries(encoder):
    outputs = [_pair("dog_01", "cat_01"), _pair("dog_02", "dog_01")]
    masks = {"dog": [_half("left")] * 2, "cat": [_half("right")] * 2}
    forward = score_subjects(encoder, outputs, subjects=[DOG, CAT], output_masks=masks, prompt=PROMPT)
    backward = score_subjects(encoder, outputs, subjects=[CAT, DOG], output_masks=masks, prompt=PROMPT)
    for a, b in zip(forward.scores, backward.scores):
        assert [s.subject for s in a.subjects] == ["sks dog", "cat"] and [s.subject for s in b.subjects] == [
            "cat",
            "sks dog",
        ]
        assert [s.cp for s in a.subjects] == [s.cp for s in reversed(b.subjects)]
        assert a.region_matrix == [row[::-1] for row in b.region_matrix[::-1]]
        assert (a.cp_min, a.cp_mean, a.pf) == (b.cp_min, b.cp_mean, b.pf)
        assert sorted(a.blends) == sorted(b.blends)


def test_pf_is_single_subject_pf_with_the_union_mask_and_every_name_stripped(encoder):
    outputs = [_pair("dog_01", "cat_01")]
    left, right = _half("left"), _half("right")
    multi = score_subjects(encoder, outputs, subjects=[DOG, CAT], output_masks=[[left], [right]], prompt=PROMPT)
    single = score_images(
        encoder, outputs, mask=np.maximum(left, right), prompt=PROMPT, subject="sks dog, dog, cat", cp=False
    )
    assert multi.scores[0].pf == single.scores[0].pf and multi.scores[0].pf is not None
    assert multi.scores[0].encoded_prompt == single.scores[0].encoded_prompt == "a photo of and on the sofa"


def test_a_subject_cannot_borrow_the_other_subjects_region(encoder):
    """Only dogs in the picture, the right one labelled 'cat': the cat's CP drops once the dog's region is excluded."""
    picture = [_pair("dog_01", "dog_02")]
    masks = [[_half("left")], [_half("right")]]
    exclusive = score_subjects(encoder, picture, subjects=[DOG, CAT], output_masks=masks).scores[0]
    everywhere = score_subjects(encoder, picture, subjects=[DOG, CAT]).scores[0]
    assert exclusive.exclusive and not everywhere.exclusive and "exclusivity needs" in everywhere.notes[0]
    assert exclusive.subjects[0].cp < everywhere.subjects[0].cp
    assert exclusive.subjects[1].cp < everywhere.subjects[1].cp


def test_a_blend_warning_fires_for_a_duplicated_subject_and_not_for_two_different_ones(naflex_encoder):
    """Random weights carry this signal on the naflex checkpoint (README gives the rates measured on both)."""
    masks = [[_half("left")], [_half("right")]]
    different = score_subjects(
        naflex_encoder, [_pair("dog_01", "cat_01")], subjects=[DOG, CAT], output_masks=masks
    ).scores[0]
    duplicate = score_subjects(
        naflex_encoder, [_pair("dog_01", "dog_02")], subjects=[DOG, CAT], output_masks=masks
    ).scores[0]
    assert different.blends == [], different.region_matrix
    assert any(b.startswith("the cat's region looks as much like the sks dog") for b in duplicate.blends), (
        duplicate.blends
    )
    matrix = duplicate.region_matrix
    assert matrix[0][1] >= matrix[0][0]  # the dog appears in the 'cat' region as strongly as in its own


def test_summaries_and_blend_rule():
    assert summarize([0.5, 0.75]) == (0.5, 0.625)
    assert summarize([0.5, None]) == (None, 0.5)  # a subject with no CP is no pass
    # R[k][l] >= R[k][k]: the dog appears in the cat's region as strongly as in its own.
    assert blend_warnings(["dog", "cat"], [[0.7, 0.7], [0.2, 0.5]]) == [
        "the cat's region looks as much like the dog as the dog's own region does (CP +0.7000 vs +0.7000): "
        "the dog drawn twice, or the two blended"
    ]
    # A reference that matches everything better (the dog's 0.9 in the cat's region) is no blend on its own.
    assert blend_warnings(["dog", "cat"], [[0.95, 0.9], [0.2, 0.5]]) == []


def test_an_empty_reference_mask_names_its_subject_and_cp_min_is_undefined(encoder):
    empty = Subject("cat", _photo("cat_00"), np.zeros((SIDE, SIDE), dtype=np.uint8))
    item = score_subjects(encoder, [_pair("dog_01", "cat_01")], subjects=[DOG, empty]).scores[0]
    assert item.subjects[0].cp is not None and item.subjects[1].cp is None
    assert "reference_mask is empty" in item.subjects[1].cp_undefined
    assert item.cp_min is None and item.cp_mean == item.subjects[0].cp
    assert item.as_image_score().cp_undefined.startswith("cat: ")


def test_overlapping_masks_are_noted_and_own_region_stays_searchable(encoder):
    whole = np.full((SIDE, 2 * SIDE), 255, dtype=np.uint8)
    item = score_subjects(
        encoder, [_pair("dog_01", "cat_01")], subjects=[DOG, CAT], output_masks=[[whole], [whole]], prompt=PROMPT
    ).scores[0]
    assert all(s.cp is not None for s in item.subjects)
    assert any("share" in note for note in item.notes) and item.pf is None and "background" in item.pf_undefined


@pytest.mark.parametrize(
    "subjects, output_masks, message",
    [
        ([], None, "subjects is empty"),
        (
            [DOG, Subject("Dog", _photo("dog_00"), box_mask(SIDE, SIDE))],
            None,
            "the name 'Dog' is given to subjects[0] and subjects[1]",
        ),
        ([DOG, CAT], [[_half("left")]], "output_masks has 1 entries for 2 subjects"),
        ([DOG, CAT], {"dog": _half("left"), "horse": _half("right")}, "output_masks names 'horse'"),
        ([DOG, CAT], {"dog": _half("left")}, "output_masks has 0 entries for the cat"),
        ([DOG, CAT], [None, [_half("right")]], "the sks dog has no output mask while the cat has one"),
        ([DOG, CAT], [[_half("left")] * 3, [_half("right")]], "output_masks[sks dog] has 3 masks for 2 images"),
        ([Subject("", _photo("dog_00"), box_mask(SIDE, SIDE))], None, "subjects[0] has no name"),
        (
            [Subject(f"s{i}", _photo("dog_00"), box_mask(SIDE, SIDE)) for i in range(MAX_SUBJECTS + 1)],
            None,
            f"at most {MAX_SUBJECTS}",
        ),
    ],
)
def test_bad_input_is_one_line_naming_what_is_wrong(naflex_encoder, subjects, output_masks, message):
    with pytest.raises(MascInputError) as raised:
        score_subjects(naflex_encoder, [_pair("dog_01", "cat_01")] * 2, subjects=subjects, output_masks=output_masks)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_one_subjects_heatmaps_are_single_subject_heatmaps(encoder):
    outputs = [_photo("dog_01"), _photo("cat_01")]
    masks = [box_mask(SIDE, SIDE, 0.2, 0.2, 0.8, 0.8)] * 2
    single = score_images(
        encoder,
        outputs,
        reference=DOG.references,
        reference_mask=DOG.reference_masks,
        mask=masks,
        prompt=PROMPT,
        subject="sks dog, dog",
        heatmaps=True,
    )
    multi = score_subjects(encoder, outputs, subjects=[DOG], output_masks=[masks], prompt=PROMPT, heatmaps=True)
    mine, theirs = multi.subject_view(0).heatmaps, single.heatmaps
    for n in range(2):
        assert np.array_equal(mine.output_presence[n], theirs.output_presence[n])
        assert np.array_equal(mine.background_attention[n], theirs.background_attention[n])
        assert all(np.array_equal(a, b) for a, b in zip(mine.reference_match[n], theirs.reference_match[n]))
    assert multi.subject_view(0).cp == single.cp


def test_each_subjects_presence_map_is_blank_inside_the_other_subjects_region(encoder):
    from masc_core import render_heatmaps

    picture = _pair("dog_01", "cat_01")
    batch = score_subjects(
        encoder,
        [picture],
        subjects=[DOG, CAT],
        output_masks=[[_half("left")], [_half("right")]],
        prompt=PROMPT,
        heatmaps=True,
    )
    dog_map, cat_map = (batch.heatmaps[k].output_presence[0] for k in range(2))
    rows, cols = dog_map.shape
    assert np.isneginf(dog_map[:, int(cols * 0.7)]).any() and np.isfinite(dog_map[:, int(cols * 0.3)]).all()
    assert np.isneginf(cat_map[:, int(cols * 0.3)]).any() and np.isfinite(cat_map[:, int(cols * 0.7)]).all()
    pictures = render_heatmaps(
        batch.subject_view(1), CAT.references if isinstance(CAT.references, list) else [CAT.references], [picture]
    )
    assert pictures.presence[0].shape == picture.shape and len(pictures.reference) == 1
