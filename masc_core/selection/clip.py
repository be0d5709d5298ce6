"""A clip's MaSC: which frames are scored, and the clip's CP and PF from its frames' (this project's extension).

The paper scores images (Sec. 3); a video of the subject is scored here frame by frame, each frame exactly as MaSC
Score scores an image, and the frames are then summarised:

- the **mean** CP and PF over the scored frames: the clip as a whole;
- the **worst frame** (lowest CP) and its CP: one frame where the subject turns into someone else is what a viewer
  sees, and a mean over 30 good frames hides it;
- the frames that **fail the rules** (``PassRules``: below ``min_cp`` / ``min_pf``, a mask below the size filter...);
  the clip passes only when none does;
- the **drift**: the mean CP of the last quarter of the scored frames minus that of the first quarter (negative: the
  identity fades as the clip goes on).

Pure arithmetic over ``ImageScore`` rows: the scoring itself is ``masc_core.scoring.clip.score_clip``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..errors import MascInputError
from ..limits import EVERY_NTH_FRAME, MAX_FRAMES, TRIM_LATENT
from ..metric.report import format_score, score_table
from ..metric.scores import ImageScore, mean_of_defined
from .ranking import PassRules

DEFAULT_MAX_FRAMES = 32
"""Frames scored per clip unless set (one vision forward each; docs/video.md gives the cost of a frame)."""
DRIFT_SHARE = 0.25
"""The share of the scored frames at each end of the clip the drift compares (at least one frame each)."""


@dataclass(frozen=True)
class ClipChoice:
    """How video candidates are scored (MaSC Video Options' value): the frames (``frames_to_score``), and the latent
    frames cut from the start before decoding (``trim_latent``: the reference frames WanVaceToVideo puts first, which
    core's Trim Video Latent cuts before VAE Decode)."""

    every_nth_frame: int = 1
    max_frames: int = DEFAULT_MAX_FRAMES
    trim_latent: int = 0

    def check(self) -> "ClipChoice":
        """These settings, or a one-line error naming the one out of range."""
        EVERY_NTH_FRAME.check(self.every_nth_frame)
        MAX_FRAMES.check(self.max_frames)
        TRIM_LATENT.check(self.trim_latent)
        return self


def frames_to_score(total: int, *, every_nth_frame: int = 1, max_frames: int = DEFAULT_MAX_FRAMES) -> list[int]:
    """The clip indices scored: every n-th frame from the first, thinned evenly to at most ``max_frames``.

    The thinning keeps the first and the last of the every-n-th frames, so the drift compares the clip's two ends.
    """
    every = EVERY_NTH_FRAME.check(every_nth_frame)
    limit = MAX_FRAMES.check(max_frames)
    if total < 1:
        raise MascInputError("the clip has no frames: give at least one frame")
    picked = list(range(0, total, every))
    if len(picked) <= limit:
        return picked
    if limit == 1:
        return [picked[0]]
    step = (len(picked) - 1) / (limit - 1)
    return [picked[round(k * step)] for k in range(limit)]


@dataclass
class ClipScore:
    """One clip's scores: its frames' and the summary (see the module's docstring)."""

    total_frames: int
    frames: list[int]
    """The clip index of each scored frame, in order; ``frame_scores[i]`` is frame ``frames[i]``'s."""
    frame_scores: list[ImageScore]
    rules: str
    """The rules the frames were judged by, in words."""
    cp: float | None = None
    """Mean CP over the scored frames with a CP."""
    pf: float | None = None
    """Mean PF over the scored frames with a PF."""
    worst_frame: int | None = None
    """The clip index of the frame with the lowest CP (None when no frame has a CP)."""
    worst_cp: float | None = None
    worst_pf: float | None = None
    """The lowest PF of any scored frame."""
    cp_drift: float | None = None
    """Mean CP of the last quarter of the scored frames minus that of the first quarter."""
    failing: list[int] = field(default_factory=list)
    """The clip indices of the scored frames that fail the rules."""
    reasons: dict[int, list[str]] = field(default_factory=dict)
    """Why each failing frame fails."""

    @property
    def passed(self) -> bool:
        """The clip passes when every scored frame does."""
        return not self.failing

    def as_image_score(self, index: int) -> ImageScore:
        """The clip as one candidate row (Sample Until, Gate, Select Best): CP and PF are its worst frame's, so a
        ``min_cp`` / ``min_pf`` a candidate must reach is one every scored frame reaches; the bands and the mask
        share are those frames' too. The clip's figures and each frame's CP and PF ride along in ``clip``."""
        scores = self.frame_scores
        by_cp = [s for s in scores if s.cp is not None]
        by_pf = [s for s in scores if s.pf is not None]
        worst_cp = min(by_cp, key=lambda s: s.cp) if by_cp else None
        worst_pf = min(by_pf, key=lambda s: s.pf) if by_pf else None
        shares = [s.foreground_fraction for s in scores if s.foreground_fraction is not None]
        first = scores[0]
        undefined_cp = next((s.cp_undefined for s in scores if s.cp_undefined), None)
        undefined_pf = next((s.pf_undefined for s in scores if s.pf_undefined), None)
        summary = self.to_dict()
        summary["frames"] = [{"frame": f, "cp": s.cp, "pf": s.pf} for f, s in zip(self.frames, scores)]
        return ImageScore(
            index=index,
            cp=None if worst_cp is None else worst_cp.cp,
            pf=None if worst_pf is None else worst_pf.pf,
            cp_undefined=undefined_cp if worst_cp is None else None,
            pf_undefined=undefined_pf if worst_pf is None else None,
            prompt=first.prompt,
            encoded_prompt=first.encoded_prompt,
            subject_found=first.subject_found,
            foreground_fraction=min(shares) if shares else None,
            small_foreground=any(s.small_foreground for s in scores),
            background_patches=first.background_patches,
            grid=first.grid,
            cp_band=None if worst_cp is None else worst_cp.cp_band,
            pf_band=None if worst_pf is None else worst_pf.pf_band,
            clip=summary,
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``clip`` part of ``score --video --json``."""
        return {
            "total_frames": self.total_frames,
            "scored_frames": len(self.frames),
            "cp": self.cp,
            "pf": self.pf,
            "worst_frame": self.worst_frame,
            "worst_cp": self.worst_cp,
            "worst_pf": self.worst_pf,
            "cp_drift": self.cp_drift,
            "rules": self.rules,
            "failing_frames": list(self.failing),
            "reasons": {str(frame): list(why) for frame, why in self.reasons.items()},
            "passed": self.passed,
        }

    def report(self, batch) -> str:
        """MaSC Score Video's text: the clip's figures, its verdict, then one line per scored frame of ``batch``
        (the frames' ``ScoreBatch``)."""
        failing = ", ".join(str(f) for f in self.failing[:12]) + (" ..." if len(self.failing) > 12 else "")
        worst = "-" if self.worst_frame is None else self.worst_frame
        lines = [
            f"clip: {len(self.frames)} of {self.total_frames} frames scored; CP mean {format_score(self.cp, 4)}, "
            f"PF mean {format_score(self.pf, 4)}",
            f"worst frame: {worst} (CP {format_score(self.worst_cp, 4)}); "
            f"CP drift first->last {format_score(self.cp_drift, 4)}",
            f"rules: {self.rules}",
            "verdict: every scored frame passes"
            if self.passed
            else f"verdict: {len(self.failing)} frame(s) fail: {failing}",
            score_table(batch.scores, [f"frame {f}" for f in self.frames]),
        ]
        first = batch.scores[0]
        if first.encoded_prompt is not None:
            lines.append(f"PF text: {first.encoded_prompt!r}")
        return "\n".join(lines)


def _drift(values: Sequence[float | None]) -> float | None:
    defined = [v for v in values if v is not None]
    if len(defined) < 2:
        return None
    end = max(1, round(len(defined) * DRIFT_SHARE))
    return float(mean_of_defined(defined[-end:]) - mean_of_defined(defined[:end]))


def summarize_clip(
    frame_scores: Sequence[ImageScore], frames: Sequence[int], total_frames: int, rules: PassRules | None = None
) -> ClipScore:
    """The clip's summary from its scored frames (``frame_scores[i]`` is clip frame ``frames[i]``)."""
    if len(frame_scores) != len(frames):
        raise ValueError(f"{len(frame_scores)} scores for {len(frames)} frames")
    if rules is None:
        # No rules given: a frame fails only when its key is undefined; CP alone when no frame has a PF (no masks).
        rules = PassRules(by="both" if any(s.pf is not None for s in frame_scores) else "cp")
    ranking = rules.rank(list(frame_scores))
    by_row = {item.index: item for item in ranking.items}
    cps = [s.cp for s in frame_scores]
    pfs = [s.pf for s in frame_scores]
    with_cp = [(cp, frame) for cp, frame in zip(cps, frames) if cp is not None]
    worst_cp, worst_frame = min(with_cp, key=lambda pair: pair[0]) if with_cp else (None, None)
    defined_pf = [pf for pf in pfs if pf is not None]
    failing = [frame for score, frame in zip(frame_scores, frames) if not by_row[score.index].passed]
    return ClipScore(
        total_frames=total_frames,
        frames=list(frames),
        frame_scores=list(frame_scores),
        rules=rules.describe(),
        cp=mean_of_defined(cps),
        pf=mean_of_defined(pfs),
        worst_frame=worst_frame,
        worst_cp=worst_cp,
        worst_pf=min(defined_pf) if defined_pf else None,
        cp_drift=_drift(cps),
        failing=failing,
        reasons={
            frame: list(by_row[score.index].reasons)
            for score, frame in zip(frame_scores, frames)
            if not by_row[score.index].passed
        },
    )


STRIP_COLUMNS = 8
"""Frames per row of a clip's strip picture."""
WORST_COLOUR = (230, 64, 64)
FAILING_COLOUR = (240, 170, 40)


def frame_tiles(clip: ClipScore) -> list:
    """One contact-sheet tile per scored frame: its clip index, CP, PF and verdict; the worst frame marked."""
    from .contact_sheet import Tile

    failing = set(clip.failing)
    tiles = []
    for frame, score in zip(clip.frames, clip.frame_scores):
        verdict = "; ".join(clip.reasons.get(frame, [])) if frame in failing else "passes"
        worst = frame == clip.worst_frame
        tiles.append(
            Tile(
                index=score.index,
                label=f"frame {frame}",
                cp=score.cp,
                pf=score.pf,
                mask=score.foreground_fraction,
                verdict=("worst frame; " if worst else "") + verdict,
                frame=WORST_COLOUR if worst else FAILING_COLOUR if frame in failing else None,
            )
        )
    return tiles


def clip_strip(frames: Sequence, clip: ClipScore, *, tile: int = 192) -> np.ndarray:
    """The scored frames in clip order, ``STRIP_COLUMNS`` to a row, each captioned with its CP and PF; the worst frame
    framed red, the other failing frames orange."""
    from .contact_sheet import contact_sheet

    return contact_sheet(frames, frame_tiles(clip), tile=tile, columns=min(STRIP_COLUMNS, len(frames)), order="index")


PREVIEW_FRAMES = 4
"""Frames of a video candidate's denoised preview that pruning scores at a judged step (spread over the clip)."""


def candidate_arrays(images: Any, name: str) -> list:
    """A round's decoded candidates: RGB uint8 images, or, for video ([B,T,H,W,C]), one clip per candidate as given
    (the clip scorer converts only the frames it scores)."""
    from ..io.images import to_rgb_uint8_list

    if len(getattr(images, "shape", ())) == 5:
        return [images[i] for i in range(images.shape[0])]
    return to_rgb_uint8_list(images, name)


def preview_clips(clips: list) -> list:
    """Each video preview thinned to ``PREVIEW_FRAMES`` frames spread over it (first and last kept): what pruning
    judges. Images pass unchanged."""
    return [
        clip[frames_to_score(clip.shape[0], max_frames=PREVIEW_FRAMES)] if len(clip.shape) == 4 else clip
        for clip in clips
    ]


def picture_of(candidate: Any, score: ImageScore) -> np.ndarray:
    """The picture a candidate is shown by (thumbnails, the contact sheet): an image itself, a clip's worst frame."""
    from ..io.images import to_rgb_uint8

    if len(candidate.shape) != 4:
        return candidate
    frame = (score.clip or {}).get("worst_frame")
    return to_rgb_uint8(candidate[frame if frame is not None else 0], "clip frame")
