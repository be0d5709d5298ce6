"""A clip's MaSC (this project's extension): frames chosen, each frame scored exactly as an image, the clip's summary,
the node MaSC Score Video, and ``score --video`` on a folder of frames and on a video file."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import box_mask, call, load_photo
from socket_values import CoreVideo
from masc_core.errors import MascInputError
from masc_core.metric.scores import ImageScore
from masc_core.selection.clip import clip_strip, frames_to_score, summarize_clip
from masc_core.selection.ranking import PassRules

SIDE = 256
CHANGING = ["dog_01", "dog_02", "cat_00", "cat_01", "dog_01", "dog_02"]
"""A clip whose subject turns into a cat for frames 2 and 3 (the reference is dog_00)."""
PROMPT = "a photo of a dog on the grass"


def frame(name: str) -> np.ndarray:
    return np.asarray(Image.fromarray(load_photo(name)).resize((SIDE, SIDE), Image.BICUBIC))


def clip_frames(names=CHANGING) -> np.ndarray:
    return np.stack([frame(n) for n in names])


def frame_masks(count: int) -> np.ndarray:
    return np.stack([box_mask(SIDE, SIDE, dtype=np.float32)] * count)


REFERENCE_MASK = box_mask(512, 512, 0.1, 0.1, 0.9, 0.9)


# ------------------------------------------------------------------ which frames


def test_every_nth_frame_from_the_first_thinned_evenly_with_both_ends_kept():
    assert frames_to_score(10) == list(range(10))
    assert frames_to_score(10, every_nth_frame=3) == [0, 3, 6, 9]
    assert frames_to_score(81, max_frames=5) == [0, 20, 40, 60, 80]
    assert frames_to_score(100, every_nth_frame=4, max_frames=3) == [0, 48, 96]
    assert frames_to_score(7, max_frames=1) == [0]
    picked = frames_to_score(1000, max_frames=32)
    assert len(picked) == 32 and picked[0] == 0 and picked[-1] == 999 and picked == sorted(set(picked))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(total=0), "the clip has no frames"),
        (dict(total=5, every_nth_frame=0), "every_nth_frame is 0"),
        (dict(total=5, max_frames=2000), "max_frames is 2000"),
        (dict(total=5, every_nth_frame=1.5), "every_nth_frame is 1.5, not a whole number"),
    ],
)
def test_bad_frame_choices_are_one_line_naming_the_setting(kwargs, message):
    total = kwargs.pop("total")
    with pytest.raises(MascInputError, match=message) as caught:
        frames_to_score(total, **kwargs)
    assert "\n" not in str(caught.value)


# ------------------------------------------------------------------ the summary


def scores(cps, pfs=None):
    pfs = pfs or [0.1] * len(cps)
    return [ImageScore(index=i, cp=cp, pf=pf) for i, (cp, pf) in enumerate(zip(cps, pfs))]


def test_summary_mean_worst_frame_failing_frames_and_drift():
    frames = [0, 4, 8, 12, 16, 20, 24, 28]
    cps = [0.9, 0.8, 0.85, 0.2, 0.3, 0.7, 0.6, 0.5]
    clip = summarize_clip(scores(cps), frames, 30, PassRules(min_cp=0.4))
    assert clip.cp == pytest.approx(np.mean(cps)) and clip.pf == pytest.approx(0.1)
    assert clip.worst_frame == 12 and clip.worst_cp == pytest.approx(0.2)
    assert clip.failing == [12, 16] and clip.reasons[16] == ["CP below 0.4"] and not clip.passed
    assert clip.cp_drift == pytest.approx(np.mean([0.6, 0.5]) - np.mean([0.9, 0.8]))  # a quarter at each end
    assert clip.to_dict()["failing_frames"] == [12, 16] and clip.to_dict()["total_frames"] == 30
    assert summarize_clip(scores(cps), frames, 30, PassRules(min_cp=0.1)).passed


def test_without_rules_a_frame_fails_only_when_its_score_is_undefined():
    clip = summarize_clip(scores([0.9, 0.1]), [0, 1], 2)
    assert clip.passed and clip.worst_frame == 1
    cp_only = [ImageScore(index=0, cp=0.5, pf=None), ImageScore(index=1, cp=None, pf=None, cp_undefined="why")]
    clip = summarize_clip(cp_only, [0, 1], 2)
    assert clip.failing == [1] and clip.worst_frame == 0 and clip.pf is None and clip.cp_drift is None


def test_strip_marks_the_worst_frame_red_and_other_failing_frames_orange():
    from masc_core.selection.clip import FAILING_COLOUR, WORST_COLOUR

    pictures = [np.full((64, 64, 3), 128, np.uint8)] * 3
    clip = summarize_clip(scores([0.9, 0.2, 0.3]), [0, 1, 2], 3, PassRules(min_cp=0.5))
    strip = clip_strip(pictures, clip, tile=96)
    assert strip.shape[1] == 3 * 96
    assert tuple(strip[1, 1]) != WORST_COLOUR and tuple(strip[1, 96 + 1]) == WORST_COLOUR
    assert tuple(strip[1, 2 * 96 + 1]) == FAILING_COLOUR


# ------------------------------------------------------------------ scoring frames


def test_each_frame_scores_exactly_as_score_images_on_that_frame(encoder):
    from masc_core import score_images
    from masc_core.scoring.clip import score_clip

    frames, masks = clip_frames(), frame_masks(len(CHANGING))
    scored = score_clip(
        encoder,
        torch.from_numpy(frames.astype(np.float32) / 255.0),
        reference=load_photo("dog_00"),
        reference_mask=REFERENCE_MASK,
        masks=torch.from_numpy(masks),
        prompt=PROMPT,
        subject="dog",
    )
    for index, score in zip(scored.clip.frames, scored.batch.scores):
        alone = score_images(
            encoder,
            frames[index],
            reference=load_photo("dog_00"),
            reference_mask=REFERENCE_MASK,
            mask=masks[index],
            prompt=PROMPT,
            subject="dog",
        ).scores[0]
        assert score.cp == pytest.approx(alone.cp, abs=1e-6) and score.pf == pytest.approx(alone.pf, abs=1e-6)


def test_a_subject_that_changes_midway_is_flagged_at_those_frames(encoder):
    from masc_core.scoring.clip import score_clip

    scored = score_clip(
        encoder,
        clip_frames(),
        reference=load_photo("dog_00"),
        reference_mask=REFERENCE_MASK,
        masks=frame_masks(len(CHANGING)),
        prompt=PROMPT,
        subject="dog",
        rules=PassRules(min_cp=0.4),
    )
    clip = scored.clip
    assert clip.failing == [2, 3] and clip.worst_frame in (2, 3) and not clip.passed
    assert clip.worst_cp < 0.4 < clip.cp


def test_only_the_chosen_frames_are_encoded_and_one_mask_serves_all(naflex_dir):
    from masc_core import MascEncoder
    from masc_core.scoring.clip import score_clip

    encoder = MascEncoder.load(naflex_dir, device="cpu")  # a fresh cache: every forward counts
    names = ["dog_01", "cat_00", "dog_02", "cat_01", "teapot_00", "duck_toy_00", "backpack_00"]
    scored = score_clip(
        encoder,
        clip_frames(names),
        reference=load_photo("dog_00"),
        reference_mask=REFERENCE_MASK,
        masks=box_mask(SIDE, SIDE),
        prompt=PROMPT,
        subject="dog",
        every_nth_frame=2,
        max_frames=3,
    )
    assert scored.clip.frames == [0, 4, 6] and scored.clip.total_frames == 7 and len(scored.frames) == 3
    assert all(s.pf is not None for s in scored.batch.scores)
    assert encoder.forward_counts["images"] == 4  # the three frames and the reference


def test_masks_that_do_not_match_the_clip_are_one_line(naflex_encoder):
    from masc_core.scoring.clip import score_clip

    with pytest.raises(MascInputError, match="mask has 4 masks for a clip of 6 frames") as caught:
        score_clip(
            naflex_encoder,
            clip_frames(),
            reference=load_photo("dog_00"),
            reference_mask=REFERENCE_MASK,
            masks=frame_masks(4),
            prompt=PROMPT,
            subject="dog",
        )
    assert "\n" not in str(caught.value)


# ------------------------------------------------------------------ the command line and the node


@pytest.fixture(scope="module")
def clip_folders(tmp_path_factory):
    """The changing clip as PNG frames, their masks named as the frames, the reference mask, and the same clip as an
    H.264 MP4 (PyAV)."""
    root = tmp_path_factory.mktemp("clip")
    frames, masks = root / "frames", root / "masks"
    frames.mkdir()
    masks.mkdir()
    pictures = clip_frames()
    for i, picture in enumerate(pictures):
        Image.fromarray(picture).save(frames / f"frame_{i}.png")
        Image.fromarray(box_mask(SIDE, SIDE)).save(masks / f"frame_{i}.png")
    Image.fromarray(REFERENCE_MASK).save(root / "reference_mask.png")
    import av

    with av.open(str(root / "clip.mp4"), "w") as container:
        stream = container.add_stream("libx264", rate=8)
        stream.width, stream.height, stream.pix_fmt = SIDE, SIDE, "yuv420p"
        for picture in pictures:
            for packet in stream.encode(av.VideoFrame.from_ndarray(picture, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return root


def score_video(model, root, *extra):
    from conftest import photo_path

    return call(
        "score",
        "--model",
        model,
        "--ref",
        photo_path("dog_00"),
        "--ref-mask",
        root / "reference_mask.png",
        "--prompt",
        PROMPT,
        "--subject",
        "dog",
        *extra,
    )


def test_score_video_on_a_folder_of_frames_agrees_with_the_node(pack, comfy_dirs, clip_folders):
    from importlib import import_module

    model = comfy_dirs["checkpoint"]
    code, out, err = score_video(
        model, clip_folders, "--video", clip_folders / "frames", "--video-masks", clip_folders / "masks",
        "--min-cp", "0.4", "--json",
    )  # fmt: skip
    assert code == 0, err
    document = json.loads(out)
    assert [f["frame"] for f in document["frames"]] == list(range(6))
    assert document["frames"][2]["name"] == "frame_2" and document["clip"]["failing_frames"] == [2, 3]
    assert document["clip"]["worst_frame"] in (2, 3) and document["clip"]["passed"] is False

    from test_nodes import load_encoder

    acceptance = import_module(pack.__name__ + ".masc_core.selection.acceptance")
    ranking = import_module(pack.__name__ + ".masc_core.selection.ranking")
    rules = acceptance.RunRules(passing=ranking.PassRules(min_cp=0.4))
    node = pack.nodes.NODE_CLASS_MAPPINGS["MaSCScoreVideo"]()
    result = node.score(
        load_encoder(pack),
        torch.from_numpy(load_photo("dog_00").astype(np.float32) / 255.0)[None],
        torch.from_numpy(REFERENCE_MASK.astype(np.float32) / 255.0)[None],
        torch.from_numpy(clip_frames().astype(np.float32) / 255.0),
        PROMPT,
        "dog",
        mask=torch.from_numpy(frame_masks(6)),
        rules=rules,
    )
    cp, pf, worst_cp, worst_frame, passed, scores, strip, report = result["result"]
    assert [s.cp for s in scores.scores] == pytest.approx([f["cp"] for f in document["frames"]], abs=1e-6)
    assert [s.pf for s in scores.scores] == pytest.approx([f["pf"] for f in document["frames"]], abs=1e-6)
    assert cp == pytest.approx(document["clip"]["cp"], abs=1e-6) and pf == pytest.approx(document["clip"]["pf"])
    assert worst_frame == document["clip"]["worst_frame"] and worst_cp == pytest.approx(document["clip"]["worst_cp"])
    assert passed is False and scores.context.labels == [f"frame {i}" for i in range(6)]
    assert strip.shape[0] == 1 and strip.shape[-1] == 3
    assert "verdict: 2 frame(s) fail: 2, 3" in report and result["ui"]["text"] == [report]


def _score_frames(pack, frames, **options):
    from test_nodes import load_encoder

    node = pack.nodes.NODE_CLASS_MAPPINGS["MaSCScoreVideo"]()
    return node.score(
        load_encoder(pack),
        torch.from_numpy(load_photo("dog_00").astype(np.float32) / 255.0)[None],
        torch.from_numpy(REFERENCE_MASK.astype(np.float32) / 255.0)[None],
        frames,
        PROMPT,
        "dog",
        mask=torch.from_numpy(frame_masks(6)),
        **options,
    )


def test_a_video_of_core_scores_as_its_frames_do(pack, comfy_dirs):
    frames = torch.from_numpy(clip_frames().astype(np.float32) / 255.0)
    as_images = _score_frames(pack, frames, every_nth_frame=2)["result"]
    video = CoreVideo(frames)
    as_video = _score_frames(pack, video, every_nth_frame=2)["result"]
    assert video.decoded
    assert [s.cp for s in as_video[5].scores] == [s.cp for s in as_images[5].scores]
    assert [s.pf for s in as_video[5].scores] == [s.pf for s in as_images[5].scores]
    assert as_video[5].context.labels == ["frame 0", "frame 2", "frame 4"] and as_video[3] == as_images[3]
    assert as_video[7] == as_images[7]  # the report


def test_frames_that_are_neither_images_nor_a_video_are_one_line(pack, comfy_dirs):
    from test_nodes import pack_errors

    with pytest.raises(pack_errors(pack).MascInputError) as refused:
        _score_frames(pack, "clip.mp4")
    assert str(refused.value) == (
        "frames is not an IMAGE or a VIDEO ('clip.mp4' arrived): connect Load Image, VAE Decode or another node's "
        "IMAGE output; or Load Video, Create Video or another node's VIDEO output"
    )


def test_score_video_reads_a_video_file_with_pyav(comfy_dirs, clip_folders):
    code, out, err = score_video(
        comfy_dirs["checkpoint"], clip_folders, "--video", clip_folders / "clip.mp4", "--every-nth-frame", "2",
        "--min-cp", "0.4", "--json", "--strip", clip_folders / "strip.png",
    )  # fmt: skip
    assert code == 0, err
    document = json.loads(out)
    assert [f["name"] for f in document["frames"]] == ["000000", "000002", "000004"]
    assert document["clip"]["total_frames"] == 6 and document["clip"]["failing_frames"] == [2]
    assert document["frames"][0]["pf"] is None  # no masks: CP only
    with Image.open(clip_folders / "strip.png") as strip:
        assert strip.width == 3 * 192


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--video", "{root}/missing.mp4"], "--video '.*missing.mp4' does not exist"),
        (["--video", "{root}/broken.mp4"], "could not be opened as a video"),
        (["--video", "{root}/frames", "--video-masks", "{root}/few_masks"], "has no mask for frame frame_4"),
        (["--video", "{root}/frames", "--out", "{root}/frames/frame_0.png"], "--video replaces --out"),
        ([], "--out is required"),
    ],
)
def test_bad_clips_and_options_are_one_line(comfy_dirs, clip_folders, arguments, message):
    root = clip_folders
    (root / "broken.mp4").write_bytes(b"not a video at all" * 10)
    few = root / "few_masks"
    few.mkdir(exist_ok=True)
    for i in range(4):
        Image.fromarray(box_mask(SIDE, SIDE)).save(few / f"frame_{i}.png")
    code, out, err = score_video(comfy_dirs["checkpoint"], root, *[a.format(root=root) for a in arguments])
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert __import__("re").search(message, err), err


def test_frame_options_out_of_range_stop_at_the_parser(comfy_dirs, clip_folders):
    with pytest.raises(SystemExit) as stopped:  # argparse's exit 2 with its one-line usage error
        score_video(comfy_dirs["checkpoint"], clip_folders, "--video", clip_folders / "frames", "--max-frames", "0")
    assert stopped.value.code == 2


def test_a_video_file_without_pyav_says_how_to_get_it(monkeypatch, tmp_path):
    import builtins

    from masc_core.io.video import open_clip

    real_import = builtins.__import__
    monkeypatch.setattr(
        builtins,
        "__import__",
        lambda name, *a, **k: (_ for _ in ()).throw(ImportError()) if name == "av" else real_import(name, *a, **k),
    )
    path = tmp_path / "clip.mp4"
    path.write_bytes(b"x")
    with pytest.raises(MascInputError, match="needs PyAV"):
        open_clip(str(path))
