"""MaSC Subject and MaSC Score Subjects: the library's multi-subject scores through ComfyUI types; Select Best and
Gate take the result as they take MaSC Score's; bad input in one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from masc_core import MascEncoder, score_subjects

from test_nodes import load_encoder
from test_subjects import CAT, DOG, PROMPT, _half, _pair


def _tensor(array: np.ndarray) -> torch.Tensor:
    """RGB uint8 -> ComfyUI IMAGE [1,H,W,3]; a mask uint8 -> MASK [1,H,W]."""
    value = torch.from_numpy(array.astype(np.float32) / 255.0)
    return value[None]


def _declare(pack, subject, mask=None, chained=None):
    node = pack.nodes.NODE_CLASS_MAPPINGS["MaSCSubject"]()
    return node.declare(
        subject.names, _tensor(subject.references), _tensor(subject.reference_masks), mask=mask, subjects=chained
    )[0]


@pytest.fixture()
def scene(pack, comfy_dirs):
    images = torch.cat([_tensor(_pair("dog_01", "cat_01")), _tensor(_pair("dog_01", "dog_02"))])
    dog_mask, cat_mask = torch.cat([_tensor(_half("left"))] * 2), torch.cat([_tensor(_half("right"))] * 2)
    subjects = _declare(pack, CAT, cat_mask, _declare(pack, DOG, dog_mask))
    return images, subjects


def test_score_subjects_node_gives_the_librarys_scores(pack, comfy_dirs, scene):
    images, subjects = scene
    node = pack.nodes.NODE_CLASS_MAPPINGS["MaSCScoreSubjects"]().score(load_encoder(pack), images, subjects, PROMPT)
    cp_min, cp_mean, pf, scores, stripped, report = node["result"]
    direct = score_subjects(
        MascEncoder.load(comfy_dirs["checkpoint"], device="cpu"),
        [_pair("dog_01", "cat_01"), _pair("dog_01", "dog_02")],
        subjects=[DOG, CAT],
        output_masks=[[_half("left")], [_half("right")]],
        prompt=PROMPT,
    )
    assert [s.cp for s in scores.scores] == pytest.approx(direct.cp_min, abs=1e-6)
    assert [s.pf for s in scores.scores] == pytest.approx(direct.pf, abs=1e-6)
    assert cp_min == pytest.approx(np.mean(direct.cp_min), abs=1e-6) and cp_mean == pytest.approx(
        np.mean(direct.cp_mean), abs=1e-6
    )
    assert stripped == "a photo of and on the sofa" and scores.context.node == "MaSCScoreSubjects"
    lines = report.splitlines()
    assert "cp_min" in lines[0] and "BLEND" not in lines[1] and "BLEND" in lines[2]
    assert node["ui"]["text"] == [report]


def test_select_best_and_gate_take_its_scores_and_reject_blends_on_request(pack, comfy_dirs, scene):
    images, subjects = scene
    nodes = pack.nodes.NODE_CLASS_MAPPINGS
    encoder = load_encoder(pack)
    rejecting = nodes["MaSCScoreSubjects"]().score(encoder, images, subjects, PROMPT, on_blend="reject")["result"][3]
    assert rejecting.scores[0].cp is not None and rejecting.scores[1].cp is None
    assert rejecting.scores[1].cp_undefined.startswith("blend: the ")
    gate = nodes["MaSCGate"]().gate(
        rejecting, images, min_cp=-1.0, min_pf=-1.0, reject_small_masks=False, min_foreground=0.05
    )
    passed = gate["result"] if isinstance(gate, tuple) else gate["result"]
    assert passed[3] == 1 and torch.equal(passed[0], images[:1])
    reporting = nodes["MaSCScoreSubjects"]().score(encoder, images, subjects, PROMPT)["result"][3]
    best = nodes["MaSCSelectBest"]().select(reporting, images, "cp", 1.0, 1.0, 2, -1.0, -1.0, False, 0.05)
    chosen = best["result"] if isinstance(best, dict) else best
    assert chosen[0].shape[0] == 2  # without reject both pass: the blend is reported, not acted on


def test_bad_subject_input_is_one_line(pack, comfy_dirs, scene):
    from importlib import import_module

    MascInputError = import_module(pack.__name__ + ".masc_core.errors").MascInputError  # the pack's own copy  # noqa: N806
    images, subjects = scene
    nodes = pack.nodes.NODE_CLASS_MAPPINGS
    encoder = load_encoder(pack)
    unmasked = _declare(pack, CAT, None, _declare(pack, DOG, torch.cat([_tensor(_half("left"))] * 2)))
    with pytest.raises(MascInputError, match="the cat has no output mask while the sks dog has one"):
        nodes["MaSCScoreSubjects"]().score(encoder, images, unmasked, PROMPT)
    with pytest.raises(MascInputError, match="names is empty"):
        _declare(pack, type(DOG)("  ", DOG.references, DOG.reference_masks))
    twice = _declare(pack, DOG, None, _declare(pack, DOG))
    with pytest.raises(MascInputError, match="the name 'sks dog' is given to subjects\\[0\\] and subjects\\[1\\]"):
        nodes["MaSCScoreSubjects"]().score(encoder, images, twice, PROMPT)
    with pytest.raises(MascInputError, match="subjects is empty"):
        nodes["MaSCScoreSubjects"]().score(encoder, images, (), PROMPT)


def test_log_scores_appends_one_row_per_image_with_cp_min_as_cp(pack, comfy_dirs, scene):
    import json
    import os

    images, subjects = scene
    scores = pack.nodes.NODE_CLASS_MAPPINGS["MaSCScoreSubjects"]().score(load_encoder(pack), images, subjects, PROMPT)[
        "result"
    ][3]
    pack.nodes.NODE_CLASS_MAPPINGS["MaSCLogScores"]().log(scores, "two_subjects.jsonl", "test")
    with open(os.path.join(comfy_dirs["output"], "two_subjects.jsonl"), encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    assert [row["cp"] for row in rows[-2:]] == pytest.approx([s.cp for s in scores.scores], abs=1e-9)
    assert rows[-1]["subject"] == "sks dog, dog, cat"
