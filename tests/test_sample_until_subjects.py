"""MaSC Sample Until with several subjects (chained MaSC Subject nodes): a candidate passes only when every subject
does (CP = cp_min), each subject is masked by its own names, blends can be rejected, and the per-subject figures
reach the report, the PNG entry, `read` and the score log. The stand-in sampler makes one picture per seed (a blend
of a dog and a teapot photo), so who passes is asserted against a direct ``score_subjects`` of the same pictures."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from comfy_harness import stand_in_sampling
from conftest import box_mask
from test_sample_until import float_image, inputs, module, plain_candidates

PROMPT = "a photo of sks dog and a teapot in the snow"


@pytest.fixture(scope="module")
def models(pack, comfy_dirs):
    from test_sample_until import models as plain_models

    return plain_models.__wrapped__(pack, comfy_dirs)


def declare(pack, names, photo, chained=None, mask=None):
    reference_mask = torch.from_numpy(box_mask(512, 512, dtype=np.float32))[None]
    node = pack.nodes.NODE_CLASS_MAPPINGS["MaSCSubject"]()
    return node.declare(names, float_image(photo), reference_mask, mask=mask, subjects=chained)[0]


@pytest.fixture(scope="module")
def dog_and_teapot(pack, comfy_dirs):
    return declare(pack, "teapot", "teapot_00", declare(pack, "sks dog, dog", "dog_00"))


def several(models, subjects, **changes):
    """Sample Until's inputs with 'subjects' in place of the single-subject reference inputs."""
    values = dict(
        reference_image=None,
        reference_mask=None,
        subject="",
        mask_subject="",
        subjects=subjects,
        segmenter=models["segmenter"],
        prompt=PROMPT,
        accept=1,
    )
    return inputs(models, **dict(values, **changes))


def run(pack, values):
    with stand_in_sampling(pack) as backend:
        out = pack.nodes.NODE_CLASS_MAPPINGS["MaSCSampleUntil"]().sample(**values)
    return out, backend


@pytest.fixture(scope="module")
def direct(pack, models, dog_and_teapot):
    """score_subjects on the plain KSampler pictures of seeds 1000..1007, each subject masked by its names."""
    subject_scoring = module(pack, "masc_core.scoring.subject_scoring")
    images = plain_candidates(models, range(1000, 1008))
    masks = [
        torch.stack(models["segmenter"].ready().masks(images, d.subject.names, threshold=0.4)) for d in dog_and_teapot
    ]
    batch = subject_scoring.score_subjects(
        models["encoder"].ready(),
        images,
        subjects=[d.subject for d in dog_and_teapot],
        output_masks=masks,
        prompt=PROMPT,
    )
    return batch


def passing_threshold(cp_min, first, stop):
    """A min_cp that candidate ``stop`` is the first to clear, counting from ``first``."""
    low, high = max(cp_min[first:stop]), cp_min[stop]
    assert low < high, "the chosen candidate is not the first to clear any threshold"
    return (low + high) / 2


def test_stops_when_every_subject_passes_not_when_one_does(pack, models, dog_and_teapot, direct):
    cp_min = direct.cp_min
    t = passing_threshold(cp_min, 1, 4)  # seeds 1001.. : the fourth candidate is the first whose weakest subject passes
    teapot = [item.subjects[1].cp for item in direct.scores]
    assert teapot[1] >= t  # the teapot alone passes at the first candidate: a one-subject rule would stop there
    out, backend = run(pack, several(models, dog_and_teapot, seed=1001, min_cp=t))
    images, latent, mask, scores, used, seeds, report = out["result"][:7]
    assert used == 4 and backend.calls == [[1001], [1002], [1003], [1004]] and seeds == "1004"
    assert [s.cp for s in scores.scores] == pytest.approx(cp_min[1:5], abs=1e-6)
    for score, item in zip(scores.scores, direct.scores[1:5]):
        assert [f["subject"] for f in score.subjects] == ["sks dog", "teapot"]
        assert [f["cp"] for f in score.subjects] == pytest.approx([s.cp for s in item.subjects], abs=1e-6)
        assert [f["mask"] for f in score.subjects] == pytest.approx(
            [s.foreground_fraction for s in item.subjects], abs=1e-6
        )
        assert score.blends == item.blends and score.pf == pytest.approx(item.pf, abs=1e-6)
    assert scores.context.verdicts[:3] == [f"rejected: CP below {t:g}"] * 3 and scores.context.verdicts[3] == "accepted"
    assert scores.context.subject == "sks dog, dog, teapot"
    lines = report.splitlines()
    assert lines[0] == "1 of 1 accepted after 4 of 8 candidates (stopped early)"
    assert "several subjects (sks dog, teapot): CP is cp_min, the weakest subject's" in report
    first = lines.index(next(line for line in lines if line.startswith("   0  1001")))
    assert lines[first + 1].strip().startswith("sks dog CP +") and " teapot CP +" in lines[first + 1]
    assert lines[first + 2].strip().startswith("blend: the sks dog's region looks as much like the teapot")
    # the returned mask is every subject's region together, for the kept candidate
    dog, teapot_mask = (
        torch.stack(models["segmenter"].ready().masks(images, names, threshold=0.4))
        for names in ("sks dog, dog", "teapot")
    )
    assert torch.equal(mask, torch.maximum(dog, teapot_mask)) and latent["batch_index"] == [3]


def test_on_blend_reject_passes_no_blended_candidate(pack, models, dog_and_teapot, direct):
    assert all(item.blends for item in direct.scores[:4])  # the stand-in pictures are literally blends of both photos
    out, _ = run(pack, several(models, dog_and_teapot, seed=1000, max_candidates=4, min_cp=-1.0, on_blend="reject"))
    _, _, _, scores, used, _, report = out["result"][:7]
    assert used == 4 and "shortfall" in report.splitlines()[0]
    assert all(s.cp is None and s.cp_undefined.startswith("blend: ") for s in scores.scores)
    assert all(v.startswith(("rejected: ", "kept below threshold: ")) for v in scores.context.verdicts)
    reported, _ = run(pack, several(models, dog_and_teapot, seed=1000, max_candidates=4, min_cp=-1.0))
    assert reported["result"][4] == 1  # the same candidates pass at once when blends are only reported


def test_several_subject_figures_reach_the_png_read_and_the_log(pack, models, dog_and_teapot, direct, tmp_path, capsys):
    from comfy_harness import save_image
    from masc_core.cli import main

    extra = {"workflow": {}}
    out, _ = run(
        pack,
        several(models, dog_and_teapot, seed=1001, max_candidates=2, min_cp=1.0, extra_pnginfo=extra, unique_id="21"),
    )
    images, _, _, scores, _, seeds, _ = out["result"][:7]
    entry = extra["masc"]["nodes"]["21"]
    record = entry["images"][0]
    assert [s["subject"] for s in record["subjects"]] == ["sks dog", "teapot"] and record["blends"] == direct.scores[
        1
    ].blends
    assert record["cp"] == pytest.approx(direct.cp_min[1], abs=1e-6)
    assert [s["cp"] for s in record["subjects"]] == pytest.approx([s.cp for s in direct.scores[1].subjects], abs=1e-6)
    ctx = {
        "saved": {},
        "saved_files": {},
        "node_id": "9",
        "output_dir": str(tmp_path),
        "prompt": {},
        "extra_pnginfo": extra,
    }
    save_image(ctx, images[:1], "masc")
    assert main(["read", ctx["saved_files"]["9"][0]]) == 0
    printed = capsys.readouterr().out.splitlines()
    best = int(seeds.split(", ")[0]) - 1001
    assert printed[1].startswith(f"  this image: #{best}  seed {seeds.split(', ')[0]}  cp_min ")
    assert (
        printed[2].startswith("      sks dog CP +")
        and " teapot CP +" in printed[2]
        and printed[3].startswith("      blend: ")
    )
    for filename in ("subjects.jsonl", "subjects.csv"):
        log = pack.nodes.NODE_CLASS_MAPPINGS["MaSCLogScores"]().log(scores, filename, "two")["result"]
        text = open(os.path.join(os.environ["MASC_OUTPUT_DIR"], log[0]), encoding="utf-8").read()
        if filename.endswith(".jsonl"):
            rows = [json.loads(line) for line in text.splitlines()]
            assert [s["subject"] for s in rows[-1]["subjects"]] == ["sks dog", "teapot"] and rows[-1]["blends"]
        else:
            header, row = text.splitlines()[0].split(","), text.splitlines()[-1]
            assert (
                header[header.index("subjects") + 1] == "blends"
                and "subject: sks dog; cp: 0." in row
                and "subject: teapot; cp: 0." in row
            )


BAD = [
    (dict(reference_image=float_image("dog_00")), "reference_image and subjects are both connected"),
    (dict(subject="dog"), "subject is 'dog' while subjects is connected"),
    (dict(mask_subject="dog"), "mask_subject is 'dog' while subjects is connected"),
    (
        dict(segmenter=None, on_blend="reject"),
        "on_blend 'reject' needs each subject's region in the candidates: connect a segmenter",
    ),
    (dict(subjects=()), "subjects is empty"),
]


@pytest.mark.parametrize("changes,message", BAD)
def test_bad_several_subject_input_is_refused_before_sampling_in_one_line(
    pack, models, dog_and_teapot, changes, message
):
    errors = module(pack, "masc_core.errors")
    with pytest.raises(errors.MascInputError, match=message) as error:
        changes = dict(changes)
        run(pack, several(models, changes.pop("subjects", dog_and_teapot), **changes))
    assert "\n" not in str(error.value)


def test_a_subject_with_a_mask_for_generated_images_and_a_missing_reference_are_refused(pack, models, dog_and_teapot):
    errors = module(pack, "masc_core.errors")
    masked = declare(pack, "cat", "cat_00", dog_and_teapot, mask=torch.ones(1, 64, 64))
    with pytest.raises(
        errors.MascInputError,
        match="the MaSC Subject 'cat' has a mask for generated images, but Sample Until makes its own",
    ):
        run(pack, several(models, masked))
    with pytest.raises(
        errors.MascInputError,
        match="reference_image is not connected: connect the subject's reference image and its mask, or chain MaSC "
        "Subject",
    ):
        run(pack, inputs(models, reference_image=None))
    with pytest.raises(errors.MascInputError, match="on_blend is 'reject' but 'subjects' is not connected"):
        run(pack, inputs(models, on_blend="reject"))


def test_one_declared_subject_is_the_single_subject_run(pack, models):
    """K = 1 through 'subjects' samples, scores and decides exactly as the single-subject inputs do."""
    single, _ = run(
        pack,
        inputs(
            models,
            segmenter=models["segmenter"],
            mask_subject="",
            rank_by="both",
            max_candidates=3,
            accept=1,
            min_cp=1.0,
        ),
    )
    one = declare(pack, "sks dog, dog", "dog_00")
    declared, _ = run(
        pack, several(models, one, prompt=inputs(models)["prompt"], rank_by="both", max_candidates=3, min_cp=1.0)
    )
    bands = ("cp_band", "pf_band", "band_notes")  # single-subject scoring only, so far (README: the bands)
    for a, b in zip(single["result"][3].scores, declared["result"][3].scores):
        assert {k: v for k, v in a.to_dict().items() if k not in bands} == {
            k: v for k, v in b.to_dict().items() if k not in bands
        }
        assert a.cp_band is not None and b.cp_band is None
    assert single["result"][5] == declared["result"][5] and torch.equal(single["result"][2], declared["result"][2])


@pytest.mark.parametrize("value", ["dog", ("not a subject",), [None]])
def test_a_subjects_value_no_masc_subject_made_is_one_line(pack, models, dog_and_teapot, value):
    """A shared workflow's value reaches 'subjects' over a link unchecked: each node that takes it holds it."""
    errors = module(pack, "masc_core.errors")
    message = (
        r"subjects is not what MaSC Subject outputs \(.* arrived\): connect a MaSC Subject node's 'subjects' output"
    )
    with pytest.raises(errors.MascInputError, match=message):
        run(pack, several(models, value))
    with pytest.raises(errors.MascInputError, match=message):
        pack.nodes.NODE_CLASS_MAPPINGS["MaSCScoreSubjects"]().score(
            models["encoder"], float_image("dog_01"), value, PROMPT
        )
    with pytest.raises(errors.MascInputError, match=message):
        declare(pack, "cat", "cat_00", value)
