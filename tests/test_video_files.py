"""A video is judged by what it decodes to, never by its header; only regular files are opened; frame names are matched
by ASCII numbers.

Every crafted file is made here (PyAV muxes JPEGs PIL writes, ``os.mkfifo`` makes the pipes). The command line runs
in a fresh interpreter with a hang guard judged by its exit, and reports its own peak RSS; MaSC Score Video gets core's
Load Video as a file-backed stand-in (``socket_values.CoreVideoFile``) that fails the test if core is asked to decode.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import box_mask, photo_path
from crafted_video import cli_in_a_fresh_process, mjpeg_video, patch_avi_frame_count
from socket_values import CoreVideoFile
from test_video import PROMPT, REFERENCE_MASK, SIDE, clip_folders, clip_frames  # noqa: F401 (clip_folders: a fixture)

from masc_core.io.images import MAX_PIXELS
from masc_core.io.video import MAX_KEPT_FRAME_BYTES, _natural_key, open_clip

OVER = 9500
"""A side whose square is just over the pixel limit (90.25 MP against 89.5 MP)."""
MEMORY_BOUND_MIB = 1024
"""What ``score --video`` may reach on a crafted file: the interpreter, torch and a tiny model (~600 MiB here), plus
one decoded frame; never a frame converted and kept (the unbounded reader reached 2,369 MiB on such a file)."""


def score_args(model, root, *extra):
    return [
        "score", "--model", model, "--ref", photo_path("dog_00"), "--ref-mask", root / "reference_mask.png",
        "--prompt", PROMPT, "--subject", "dog", *extra,
    ]  # fmt: skip


def one_line(lines: list[str]) -> str:
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("fmt, suffix", [("avi", "avi"), ("matroska", "mkv")])
def test_a_frame_over_the_pixel_limit_behind_a_small_header_is_refused_as_it_decodes(
    tmp_path, naflex_dir, clip_folders, fmt, suffix
):
    video = mjpeg_video(tmp_path / f"lie.{suffix}", [(64, 64)] + [(OVER, OVER)] * 4, fmt=fmt)
    code, out, err, peak = cli_in_a_fresh_process(*score_args(naflex_dir, clip_folders, "--video", video))
    assert code == 2 and out == ""
    assert f"frame 1 is {OVER}x{OVER} pixels, more than the {MAX_PIXELS:,} read here" in one_line(err)
    assert peak < MEMORY_BOUND_MIB, f"peak RSS {peak:.0f} MiB"


def test_a_stream_that_changes_size_is_refused_naming_the_frame(tmp_path):
    video = mjpeg_video(tmp_path / "resized.avi", [(64, 64), (64, 64), (128, 96), (64, 64)])
    with pytest.raises(Exception) as refused:
        open_clip(video)
    assert str(refused.value).endswith(
        "changes frame size at frame 2 (64x64 to 128x96): re-encode the video at one size"
    )


def test_frames_are_counted_by_decoding_whatever_the_header_says(tmp_path, naflex_dir, clip_folders):
    video = mjpeg_video(tmp_path / "count.avi", [(64, 64)] * 12)
    patch_avi_frame_count(video, 1)
    import av

    with av.open(video) as container:
        assert container.streams.video[0].frames == 1  # the header's claim
    code, out, err, _ = cli_in_a_fresh_process(*score_args(naflex_dir, clip_folders, "--video", video, "--json"))
    assert code == 0, err
    document = json.loads(out)
    assert document["clip"]["total_frames"] == 12 and len(document["frames"]) == 12


def test_the_frames_kept_are_bounded_before_the_second_decode(tmp_path, monkeypatch):
    from masc_core.io import video as video_module

    clip = open_clip(mjpeg_video(tmp_path / "many.avi", [(64, 48)] * 10))
    monkeypatch.setattr(video_module, "MAX_KEPT_FRAME_BYTES", 5 * 64 * 48 * 3)
    assert len(clip.read([0, 2, 4, 6, 8])) == 5  # exactly at the bound
    monkeypatch.setattr(video_module, "_read_frames", lambda *a: pytest.fail("decoded past the bound"))
    with pytest.raises(Exception, match=r"the 6 frames scored hold 0\.0 GiB, more than the 0 GiB kept here"):
        clip.read([0, 1, 2, 3, 4, 5])


def test_a_folder_of_frames_is_bounded_by_what_it_keeps(tmp_path, monkeypatch):
    from masc_core.io import video as video_module

    for i in range(4):
        Image.new("RGB", (32, 32)).save(tmp_path / f"{i}.png")
    clip = open_clip(str(tmp_path))
    monkeypatch.setattr(video_module, "MAX_KEPT_FRAME_BYTES", 2 * 32 * 32 * 3)
    with pytest.raises(Exception, match="the frames scored up to frame 2 hold"):
        clip.read([0, 1, 2])


# ------------------------------------------------------------------ core's VIDEO in MaSC Score Video


def score_video_node(pack, video):
    from test_nodes import load_encoder

    node = pack.nodes.NODE_CLASS_MAPPINGS["MaSCScoreVideo"]()
    reference = torch.from_numpy(np.asarray(Image.open(photo_path("dog_00")).convert("RGB"), np.float32) / 255.0)
    return node.score(
        load_encoder(pack),
        reference[None],
        torch.from_numpy(REFERENCE_MASK.astype(np.float32) / 255.0)[None],
        video,
        PROMPT,
        "dog",
    )


def refusal(pack, video) -> str:
    from test_nodes import pack_errors

    with pytest.raises(pack_errors(pack).MascInputError) as refused:
        score_video_node(pack, video)
    message = str(refused.value)
    assert "\n" not in message and os.sep + "tmp" not in message and str(video.path) not in message
    assert not video.decoded
    return message


def test_load_videos_frames_are_read_by_the_pack_and_score_as_the_same_frames(pack, comfy_dirs, clip_folders):
    video = CoreVideoFile(clip_folders / "clip.mp4")
    result = score_video_node(pack, video)["result"]
    from masc_core.io.video import open_clip as pack_reader

    clip = pack_reader(str(clip_folders / "clip.mp4"))
    frames = torch.from_numpy(np.stack(clip.read(list(range(clip.count)))).astype(np.float32) / 255.0)
    as_images = score_video_node(pack, frames)["result"]
    assert not video.decoded
    assert [s.cp for s in result[5].scores] == pytest.approx([s.cp for s in as_images[5].scores], abs=1e-6)
    assert result[5].context.labels == [f"frame {i}" for i in range(6)]


def test_a_trimmed_video_keeps_core_s_window(pack, comfy_dirs, tmp_path):
    video = mjpeg_video(tmp_path / "window.avi", [(64, 64)] * 8)  # 8 fps: frame i at i/8 s
    result = score_video_node(pack, CoreVideoFile(video, start=0.25, duration=0.5))["result"]
    assert result[5].context.labels == ["frame 0", "frame 1", "frame 2", "frame 3"]  # frames 2..5 of the file


def test_a_video_whose_header_hides_its_frames_is_refused_before_core_decodes_it(pack, comfy_dirs, tmp_path):
    video = mjpeg_video(tmp_path / "hidden.avi", [(8000, 8000)] * 12, header=(8000, 8000))
    patch_avi_frame_count(video, 1)
    message = refusal(pack, CoreVideoFile(video))
    gib = 12 * 8000 * 8000 * 3 / 1024**3
    assert message.startswith(
        f"frames 'hidden.avi': the 12 frames scored hold {gib:.1f} GiB, more than the "
        f"{MAX_KEPT_FRAME_BYTES / 1024**3:.0f} GiB kept here"
    )


def test_a_frame_over_the_limit_in_load_video_is_one_line_naming_the_file_only(pack, comfy_dirs, tmp_path):
    video = mjpeg_video(tmp_path / "bomb.mkv", [(64, 64)] + [(OVER, OVER)] * 2, fmt="matroska")
    message = refusal(pack, CoreVideoFile(video))
    assert message.startswith(f"frames 'bomb.mkv' frame 1 is {OVER}x{OVER} pixels")


def test_a_file_that_is_not_a_video_through_load_video_is_one_line_without_the_path(pack, comfy_dirs, tmp_path):
    path = tmp_path / "notes.mp4"
    path.write_text("not a video\n" * 50)
    message = refusal(pack, CoreVideoFile(path))
    assert message == (
        "frames 'notes.mp4' could not be opened as a video (Invalid data found when processing input): check the file"
    )


def test_a_video_type_that_cannot_be_sized_first_is_refused(pack, comfy_dirs, monkeypatch):
    video_host = __import__(f"{pack.__name__}.nodes.host.video", fromlist=["video"])

    class Foreign:  # a VIDEO type that is neither core's file nor its in-memory frames
        decoded, path = False, "foreign"

        def get_components(self):
            self.decoded = True

    class Held:
        pass

    monkeypatch.setattr(video_host, "VideoFromComponents", Held)
    assert refusal(pack, Foreign()).startswith("frames: this VIDEO (Foreign) cannot be sized before it is decoded")


# ------------------------------------------------------------------ only regular files are opened


@pytest.fixture
def fifo(tmp_path):
    def make(path):
        os.mkfifo(path)
        return path

    return make


def test_a_fifo_as_the_video_is_one_line(tmp_path, naflex_dir, clip_folders, fifo):
    video = fifo(tmp_path / "clip.mp4")
    code, out, err, _ = cli_in_a_fresh_process(*score_args(naflex_dir, clip_folders, "--video", video))
    assert code == 2 and one_line(err).endswith("is a named pipe (FIFO), not a regular file: give a file")


def test_a_fifo_among_the_frames_is_refused_before_any_frame_is_read(tmp_path, naflex_dir, clip_folders, fifo):
    frames = tmp_path / "frames"
    frames.mkdir()
    for i in range(3):
        Image.fromarray(clip_frames()[i]).save(frames / f"{i}.png")
    fifo(frames / "3.png")
    code, _, err, _ = cli_in_a_fresh_process(*score_args(naflex_dir, clip_folders, "--video", frames))
    assert code == 2 and "the frame '3.png' is a named pipe (FIFO)" in one_line(err)


def test_a_fifo_among_the_masks_is_one_line(tmp_path, naflex_dir, clip_folders, fifo):
    masks = tmp_path / "masks"
    masks.mkdir()
    for i in range(6):
        if i != 1:
            Image.fromarray(box_mask(SIDE, SIDE)).save(masks / f"frame_{i}.png")
    fifo(masks / "frame_1.png")
    argv = score_args(naflex_dir, clip_folders, "--video", clip_folders / "frames", "--video-masks", masks)
    code, _, err, _ = cli_in_a_fresh_process(*argv)
    assert code == 2 and "the frame 'frame_1.png' is a named pipe (FIFO)" in one_line(err)


@pytest.mark.parametrize(
    "command, name",
    [
        (["read", "{fifo}"], "scores.png"),
        (["prune-report", "{fifo}"], "study.jsonl"),
        (["calibrate", "{fifo}"], "picks.jsonl"),
        (["eval", "{fifo}", "--model", "m", "--out-dir", "{tmp}/out"], "manifest.csv"),
        (
            [
                "score",
                "--model",
                "m",
                "--ref",
                "{fifo}",
                "--ref-mask",
                "{fifo}",
                "--out",
                "{fifo}",
                "--prompt",
                "a dog",
                "--subject",
                "dog",
            ],
            "ref.png",
        ),
    ],
)
def test_a_fifo_given_to_any_command_is_one_line(tmp_path, fifo, command, name):
    path = fifo(tmp_path / name)
    argv = [a.format(fifo=path, tmp=tmp_path) for a in command]
    code, _, err, _ = cli_in_a_fresh_process(*argv)
    assert code == 2 and "is a named pipe (FIFO), not a regular file" in one_line(err), err


def test_a_model_file_that_is_a_pipe_or_a_device_is_refused_before_loading(tmp_path, naflex_dir, fifo):
    import shutil

    from masc_core.errors import MascModelError
    from masc_core.models.encoder import MascEncoder

    for kind, make in [("named pipe (FIFO)", fifo), ("device", lambda p: os.symlink("/dev/zero", p))]:
        folder = tmp_path / kind.split()[0]
        shutil.copytree(naflex_dir, folder)
        os.remove(folder / "model.safetensors")
        make(folder / "model.safetensors")
        with pytest.raises(MascModelError) as refused:
            MascEncoder.load(str(folder))
        assert f"the file 'model.safetensors' is a {kind}, not a regular file" in str(refused.value)


def test_the_log_node_refuses_a_fifo_without_waiting(pack, comfy_dirs, fifo):
    from test_nodes import pack_errors, scored_batch

    fifo(os.path.join(comfy_dirs["output"], "pipe.jsonl"))
    try:
        with pytest.raises(pack_errors(pack).MascInputError) as refused:
            pack.nodes.NODE_CLASS_MAPPINGS["MaSCLogScores"]().log(scored_batch(pack)[0], "pipe.jsonl", "")
    finally:
        os.remove(os.path.join(comfy_dirs["output"], "pipe.jsonl"))
    assert str(refused.value) == (
        "filename 'pipe.jsonl' is a named pipe (FIFO), not a regular file: choose another filename, or move that file "
        "away"
    )


# ------------------------------------------------------------------ frame and mask names


def test_only_ascii_digits_order_frames_as_numbers():
    names = ["frame_10", "frame_2", "①", "²", "frame_1", "٣"]
    assert sorted(names, key=_natural_key) == ["frame_1", "frame_2", "frame_10", "²", "٣", "①"]


def test_digit_like_frame_and_mask_names_are_matched_as_text(tmp_path, naflex_dir, clip_folders):
    frames, masks = tmp_path / "frames", tmp_path / "masks"
    frames.mkdir()
    masks.mkdir()
    for i, name in enumerate(["0", "1", "①"]):
        Image.fromarray(clip_frames()[i]).save(frames / f"{name}.png")
        Image.fromarray(box_mask(SIDE, SIDE)).save(masks / f"{name}.png")
    Image.fromarray(box_mask(SIDE, SIDE)).save(masks / "².png")  # a mask no frame is named for: unused
    argv = score_args(naflex_dir, clip_folders, "--video", frames, "--video-masks", masks, "--json")
    code, out, err, _ = cli_in_a_fresh_process(*argv)
    assert code == 0, err
    assert [f["name"] for f in json.loads(out)["frames"]] == ["0", "1", "①"]
    os.remove(masks / "①.png")
    code, _, err, _ = cli_in_a_fresh_process(*argv)
    assert code == 2 and "has no mask for frame ①" in one_line(err)


def test_the_crafted_videos_benchmark_runs_and_refuses_what_the_review_found():
    """``python -m benchmarks crafted-videos``'s own cases (its seconds and memory are not asserted: figures)."""
    from argparse import Namespace

    from benchmarks.crafted_videos import measure, table

    rows = measure(Namespace(timeout=600))["rows"]
    assert [r["exit"] for r in rows] == [0, 2, 2], rows
    assert "frame 1 is 10000x10000 pixels" in rows[1]["said"]
    assert "the 12 frames scored hold" in rows[2]["said"]
    assert table({"rows": rows}).count("\n") == len(rows) + 1
