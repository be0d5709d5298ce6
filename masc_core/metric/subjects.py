"""Several subjects in one image: what the caller declares and what multi-subject scoring returns.

Plain data and arithmetic on numbers (no model code), used by ``masc_core.scoring.subject_scoring``.

The extension (this project's, not the paper's; docs/subjects.md gives the reasons):

- CP_k: Eq. 1 for subject k's reference-foreground patches, searched over the output patches that are
  not inside another subject's output region (k's own region and the background stay searchable),
  so one subject cannot borrow another's likeness.
- Region matrix R[k][l]: Eq. 1 of subject k searched only inside subject l's output region. A blend
  warning for region l when another subject k appears there at least as strongly as in its own
  region (R[k][l] >= R[k][k]; ``blend_warnings`` says why not R[k][l] >= R[l][l]).
- cp_min (the weakest subject: what thresholds and acceptance use) and cp_mean (the benchmark card's
  averaging).
- PF: the attention pool over the patches outside the union of all subjects' output masks, against
  the prompt with every subject's names stripped.
- K = 1 is single-subject MaSC, number for number.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from ..errors import MascInputError
from .scores import Heatmaps, ImageScore, ReferenceInfo, ScoreBatch, defined_number, mean_of_defined
from .stripping import parse_subject_names

MAX_SUBJECTS = 8
"""More subjects than this are refused: the region matrix grows as K^2, and no benchmark goes past 3."""

OVERLAP_WARNING_SHARE = 0.5
"""Two subjects' output regions sharing more than this share of the smaller one get a warning."""


@dataclass
class Subject:
    """One subject: its name(s), its reference view(s) and their foreground masks.

    ``names``: "sks dog, dog" (comma-separated) or a list; the first is the subject's label in
    reports, every name is stripped from the prompt. ``references``: one image or K views (as
    ``score_images`` takes them); ``reference_masks``: one per view, or one for all.
    """

    names: str | Sequence[str]
    references: Any
    reference_masks: Any

    @property
    def name_list(self) -> list[str]:
        return parse_subject_names(self.names)

    @property
    def label(self) -> str:
        names = self.name_list
        return names[0] if names else ""


def check_subjects(subjects: Sequence[Subject]) -> list[Subject]:
    """The subjects as a list, each named, no name shared between two subjects; one line otherwise."""
    if isinstance(subjects, Subject):
        subjects = [subjects]
    subjects = list(subjects or [])
    if not subjects:
        raise MascInputError(
            "subjects is empty: declare at least one subject (its names, reference and reference mask)"
        )
    if len(subjects) > MAX_SUBJECTS:
        raise MascInputError(f"{len(subjects)} subjects: at most {MAX_SUBJECTS} are supported in one image")
    owner: dict[str, int] = {}
    for k, subject in enumerate(subjects):
        if not isinstance(subject, Subject):
            raise MascInputError(
                f"subjects[{k}] is a {type(subject).__name__}: give masc_core.Subject(names, references, "
                "reference_masks)"
            )
        names = subject.name_list
        if not names:
            raise MascInputError(f"subjects[{k}] has no name: give the subject's name(s), e.g. 'sks dog, dog'")
        for name in names:
            other = owner.setdefault(name.lower(), k)
            if other != k:
                raise MascInputError(
                    f"the name '{name}' is given to subjects[{other}] and subjects[{k}]: each name must belong to one "
                    "subject"
                )
    return subjects


def every_or_none(subjects: Sequence[Subject], output_masks: Sequence[Any]) -> list[Any] | None:
    """The subjects' output masks (one entry per subject, in order) when every subject has them, None when none has.

    Exclusivity needs every region: a subject without a mask would be searched everywhere, others' regions
    included, while the others could not search its region. So some-but-not-all is refused, in one line
    naming the first subject without a mask.
    """
    given = [m is not None for m in output_masks]
    if not any(given):
        return None
    if not all(given):
        missing = subjects[given.index(False)].label
        having = subjects[given.index(True)].label
        raise MascInputError(
            f"the {missing} has no output mask while the {having} has one: give every subject its mask in the "
            "generated images (MaSC Auto Mask prompted with its name), or none"
        )
    return list(output_masks)


def all_names(subjects: Sequence[Subject]) -> list[str]:
    """Every subject's names, in subject order: what PF strips from the prompt."""
    return [name for subject in subjects for name in subject.name_list]


@dataclass
class SubjectScore:
    """One subject's scores on one output."""

    subject: str
    """The subject's label (its first name)."""
    cp: float | None = None
    """CP_k: Eq. 1 searched outside the other subjects' regions (mean over this subject's views)."""
    cp_per_reference: list[float | None] = field(default_factory=list)
    cp_undefined: str | None = None
    foreground_fraction: float | None = None
    """Share of the output's pixels under this subject's output mask; None without masks."""
    small_foreground: bool = False
    """This subject's output mask is below the paper's 5% filter: probably not rendered."""
    region_patches: int | None = None
    """Output patches inside this subject's region (weight >= 0.5); None without masks."""


@dataclass
class MultiSubjectScore:
    """Every subject's scores on one output, the region matrix, blend warnings and PF."""

    index: int
    subjects: list[SubjectScore]
    cp_min: float | None = None
    """The weakest subject's CP (None when any subject's CP is undefined): thresholds use this."""
    cp_mean: float | None = None
    """Mean CP over the subjects whose CP is defined (the benchmark card's averaging)."""
    region_matrix: list[list[float | None]] | None = None
    """[k][l]: subject k's Eq. 1 searched only inside subject l's region; None without masks."""
    blends: list[str] = field(default_factory=list)
    """One line per region where another subject appears at least as strongly as in its own region."""
    exclusive: bool = False
    """Whether CP_k excluded the other subjects' regions (needs the output masks)."""
    notes: list[str] = field(default_factory=list)
    """What the reader should know: exclusivity without masks, overlapping regions."""
    pf: float | None = None
    pf_undefined: str | None = None
    prompt: str | None = None
    encoded_prompt: str | None = None
    """The prompt with every subject's names stripped."""
    background_patches: int | None = None
    grid: tuple[int, int] = (0, 0)

    @property
    def blend(self) -> bool:
        return bool(self.blends)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (undefined is null, never NaN)."""
        data = asdict(self)
        data["grid"] = list(self.grid)
        data["blend"] = self.blend
        for name in ("cp_min", "cp_mean", "pf"):
            data[name] = defined_number(data[name])
        for entry in data["subjects"]:
            entry["cp"] = defined_number(entry["cp"])
            entry["cp_per_reference"] = [defined_number(v) for v in entry["cp_per_reference"]]
        if data["region_matrix"] is not None:
            data["region_matrix"] = [[defined_number(v) for v in row] for row in data["region_matrix"]]
        return data

    def as_image_score(self, reject_blends: bool = False) -> ImageScore:
        """The output as single-subject code sees it: CP = cp_min, so ranking, thresholds and reports apply as they are.

        ``reject_blends``: an output with a blend warning gets an undefined CP ("blend: ..."), so no
        threshold or ranking passes it.

        The mask share is the smallest subject's (it decides ``small_foreground``); each subject's CP and share
        ride along in ``ImageScore.subjects`` for the PNG entry, the score log and reports.
        """
        shares = [s.foreground_fraction for s in self.subjects if s.foreground_fraction is not None]
        undefined = [f"{s.subject}: {s.cp_undefined}" for s in self.subjects if s.cp is None and s.cp_undefined]
        cp, cp_undefined = self.cp_min, ("; ".join(undefined) or None) if self.cp_min is None else None
        if reject_blends and self.blends:
            cp, cp_undefined = None, "blend: " + self.blends[0]
        return ImageScore(
            index=self.index,
            cp=cp,
            pf=self.pf,
            cp_undefined=cp_undefined,
            cp_per_reference=list(self.subjects[0].cp_per_reference) if len(self.subjects) == 1 else [],
            pf_undefined=self.pf_undefined,
            prompt=self.prompt,
            encoded_prompt=self.encoded_prompt,
            subject_found=None if self.prompt is None else self.prompt != self.encoded_prompt,
            foreground_fraction=min(shares) if shares else None,
            small_foreground=any(s.small_foreground for s in self.subjects),
            background_patches=self.background_patches,
            grid=self.grid,
            subjects=[{"subject": s.subject, "cp": s.cp, "mask": s.foreground_fraction} for s in self.subjects]
            if len(self.subjects) > 1
            else None,  # one subject is single-subject MaSC, field for field
            blends=list(self.blends),
        )


def summarize(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """(cp_min, cp_mean): cp_min only when every subject's CP is defined (a missing subject is no pass)."""
    defined = [v for v in values if v is not None]
    cp_min = min(defined) if defined and len(defined) == len(values) else None
    return cp_min, mean_of_defined(defined)


def blend_warnings(labels: Sequence[str], matrix: Sequence[Sequence[float | None]]) -> list[str]:
    """A line for each region l where another subject k appears at least as strongly as in its own region.

    The rule compares one reference with itself across two regions: R[k][l] >= R[k][k]. Comparing two
    references in one region (R[k][l] >= R[l][l]) mixes their baselines. One subject's reference can
    match any picture better than another's does, and on the shipped photos that fired for two
    different subjects (docs/subjects.md).
    """
    found = []
    for region, owner in enumerate(labels):
        for other, label in enumerate(labels):
            inside, at_home = matrix[other][region], matrix[other][other]
            if other != region and inside is not None and at_home is not None and inside >= at_home:
                found.append(
                    f"the {owner}'s region looks as much like the {label} as the {label}'s own region does "
                    f"(CP {inside:+.4f} vs {at_home:+.4f}): the {label} drawn twice, or the two blended"
                )
    return found


@dataclass
class SubjectInfo:
    """What CP sees of one subject's references."""

    subject: str
    names: list[str]
    references: list[ReferenceInfo]


@dataclass
class SubjectBatch:
    """The result of one ``score_subjects`` call."""

    scores: list[MultiSubjectScore]
    subjects: list[SubjectInfo]
    min_foreground: float
    heatmaps: list[Heatmaps] | None = None
    """[k]: subject k's patch maps (``score_subjects(heatmaps=True)``), else None."""

    @property
    def cp_min(self) -> list[float | None]:
        return [s.cp_min for s in self.scores]

    @property
    def cp_mean(self) -> list[float | None]:
        return [s.cp_mean for s in self.scores]

    @property
    def pf(self) -> list[float | None]:
        return [s.pf for s in self.scores]

    def subject_view(self, k: int) -> ScoreBatch:
        """Subject k as a single-subject batch (its CP, the shared PF, its heatmaps): for ``render_heatmaps``."""
        scores = []
        for item in self.scores:
            own = item.subjects[k]
            scores.append(
                ImageScore(
                    index=item.index,
                    cp=own.cp,
                    pf=item.pf,
                    cp_per_reference=list(own.cp_per_reference),
                    cp_undefined=own.cp_undefined,
                    pf_undefined=item.pf_undefined,
                    prompt=item.prompt,
                    encoded_prompt=item.encoded_prompt,
                    foreground_fraction=own.foreground_fraction,
                    small_foreground=own.small_foreground,
                    background_patches=item.background_patches,
                    grid=item.grid,
                )
            )
        maps = self.heatmaps[k] if self.heatmaps is not None else None
        return ScoreBatch(
            scores=scores, references=self.subjects[k].references, heatmaps=maps, min_foreground=self.min_foreground
        )

    def image_scores(self, reject_blends: bool = False) -> list[ImageScore]:
        """Per output, the single-subject view (``MultiSubjectScore.as_image_score``) for ranking and thresholds."""
        return [s.as_image_score(reject_blends) for s in self.scores]

    def as_score_batch(self, reject_blends: bool = False) -> ScoreBatch:
        """The batch as single-subject code takes it (MaSC Select Best, Gate, Log Scores, Sample Until's loop):
        ``image_scores`` and every subject's reference views, in subject order."""
        return ScoreBatch(
            scores=self.image_scores(reject_blends),
            min_foreground=self.min_foreground,
            references=[r for info in self.subjects for r in info.references],
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "results": [s.to_dict() for s in self.scores],
            "subjects": [
                {
                    "subject": info.subject,
                    "names": info.names,
                    "references": [dict(asdict(r), grid=list(r.grid)) for r in info.references],
                }
                for info in self.subjects
            ],
            "min_foreground": self.min_foreground,
        }
