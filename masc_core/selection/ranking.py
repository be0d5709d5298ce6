"""Ranking and selecting outputs by their MaSC scores (best-of-N, rejection sampling).

The key an output is ranked by is CP, PF, or a weighted sum of the two
(``by="both"``: ``cp_weight * CP + pf_weight * PF``). Scores are absolute,
so an output's key never depends on the rest of the batch.

An output *passes* when its key is defined, it clears the thresholds given
(``min_cp``, ``min_pf``), and, with ``reject_small_masks``, its mask is not
below the paper's filter (a near-empty mask usually means the subject was
not rendered). ``select`` keeps the best ``top_k`` of the passing outputs.

An output is *uncertain* when a score's mask-sensitivity band (``ImageScore.cp_band`` / ``pf_band``,
``masc_core.scoring.mask_bands``) straddles its threshold: the score with the mask one patch smaller or larger
would decide the other way. ``on_uncertain`` says what then: ``keep but mark`` (the score decides, the
verdict says uncertain), ``accept`` (that threshold counts as cleared) or ``reject`` (it counts as failed).

``PassRules`` holds all of this in one value (the key and its weights, the thresholds, the mask filter,
``on_uncertain``, ``on_blend``): what Select Best, Gate, Pick, MaSC Sample Until's acceptance loop and
pruning's survivors all rank and judge by, and one ``describe()`` for their reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..errors import MascInputError
from ..limits import TOP_K
from ..metric.report import ranking_table
from ..metric.scores import ImageScore

RANK_KEYS = ("cp", "pf", "both")
KEEP_BUT_MARK = "keep but mark"
UNCERTAIN_CHOICES = (KEEP_BUT_MARK, "accept", "reject")
"""What an uncertain output becomes (see the module); the first is the default and changes no decision."""


@dataclass
class RankedItem:
    """One output in a ranking."""

    index: int
    """Position in the scored batch."""
    cp: float | None
    pf: float | None
    key: float | None
    """The value ranked by; None if undefined."""
    passed: bool
    reasons: list[str] = field(default_factory=list)
    """Why the output did not pass (empty when it did)."""
    foreground_fraction: float | None = None
    """Share of the output under its mask; None without a mask."""
    uncertain: list[str] = field(default_factory=list)
    """One line per threshold its mask-sensitivity band straddles (empty when none does)."""


@dataclass
class Ranking:
    """Outputs best first, and which of them are selected."""

    items: list[RankedItem]
    """All outputs, best first (undefined keys last, ties in batch order)."""
    selected: list[int]
    """Batch indices of the selected outputs, best first."""
    by: str
    cp_weight: float = 1.0
    pf_weight: float = 1.0

    @property
    def order(self) -> list[int]:
        return [item.index for item in self.items]

    @property
    def key_label(self) -> str:
        """What the key column holds (``key_label``)."""
        return key_label(self.by, self.cp_weight, self.pf_weight)

    def table(self, names: Sequence[str] | None = None) -> str:
        """A readable ranking, one line per output (``masc_core.metric.report.ranking_table``)."""
        return ranking_table(self, names)

    def verdicts(self, chosen: Sequence[int], chosen_word: str) -> list[str]:
        """Each output's verdict in batch order, as the PNG metadata and the score log keep it: ``chosen_word``
        ("selected", "passed") for the ``chosen`` ones, else "passed" or "rejected: <reasons>", marked where its
        masks could flip the decision."""
        items = {item.index: item for item in self.items}
        verdicts = []
        for index in range(len(self.items)):
            item = items[index]
            word = (
                chosen_word if index in chosen else "passed" if item.passed else "rejected: " + "; ".join(item.reasons)
            )
            verdicts.append(word + uncertain_mark(item.uncertain))
        return verdicts

    def pass_lines(self) -> list[str]:
        """One line per output in batch order: ``#3: pass`` or ``#3: reject (<reasons>)``, marked where uncertain."""
        return [
            f"#{item.index}: "
            + ("pass" if item.passed else "reject (" + "; ".join(item.reasons) + ")")
            + uncertain_mark(item.uncertain)
            for item in sorted(self.items, key=lambda x: x.index)
        ]

    def top_k_note(self, top_k: int) -> str:
        """Why fewer than ``top_k`` outputs are selected: the batch is smaller, or fewer passed (empty when
        neither)."""
        count, passing = len(self.items), len([item for item in self.items if item.passed])
        if top_k > count:
            return f"\ntop_k is {top_k} but the batch has {count} images: at most {min(count, passing)} selected"
        if passing < top_k:
            return f"\ntop_k is {top_k} but only {passing} of {count} images passed"
        return ""


def uncertain_mark(uncertain: list[str]) -> str:
    """What a verdict adds for a decision its masks could flip: `` (uncertain: CP band [...] straddles 0.6)``."""
    return f" (uncertain: {'; '.join(uncertain)})" if uncertain else ""


def key_label(by: str, cp_weight: float = 1.0, pf_weight: float = 1.0) -> str:
    """What a ranking's key column holds: CP, PF, CP+PF (weights 1) or a weighted score."""
    if by != "both":
        return by
    return "CP+PF" if cp_weight == pf_weight == 1.0 else "score"


def ranking_key(score: ImageScore, by: str, cp_weight: float = 1.0, pf_weight: float = 1.0) -> float | None:
    """The value ``score`` is ranked by, or None when it is undefined."""
    if by == "cp":
        return score.cp
    if by == "pf":
        return score.pf
    if score.cp is None or score.pf is None:
        return None
    return cp_weight * score.cp + pf_weight * score.pf


BLEND_CHOICES = ("report", "reject")
"""With several subjects: a blend warning is reported only, or the output does not pass."""
THRESHOLD_OFF = -1.0
"""A threshold widget at this value (or below) is off: the nodes' min_cp and min_pf widgets start here."""


def threshold_from_widget(value) -> float | None:
    """A threshold widget's value, or None when it is off (``THRESHOLD_OFF``) or absent."""
    return None if value is None or value <= THRESHOLD_OFF else float(value)


@dataclass(frozen=True)
class PassRules:
    """What passes and in which order: one value for every node and loop that ranks or judges outputs.

    ``by`` / ``cp_weight`` / ``pf_weight``: the ranking key; ``min_cp`` / ``min_pf``: thresholds (None = off);
    ``reject_small_masks`` with ``min_foreground``: the paper's mask filter (``min_foreground`` None = the flag
    computed at scoring time); ``on_uncertain``: what a score whose band straddles a threshold becomes;
    ``on_blend``: with several subjects, whether a blend warning only reports or rejects.
    """

    by: str = "both"
    cp_weight: float = 1.0
    pf_weight: float = 1.0
    min_cp: float | None = None
    min_pf: float | None = None
    reject_small_masks: bool = False
    min_foreground: float | None = None
    on_uncertain: str = KEEP_BUT_MARK
    on_blend: str = "report"

    @classmethod
    def from_widgets(cls, widgets: Mapping) -> "PassRules":
        """The rules a node's widgets give, read by name (``rank_by``, ``cp_weight``, ``pf_weight``, ``min_cp``,
        ``min_pf``, ``reject_small_masks``, ``min_foreground``, ``on_uncertain``, ``on_blend``): a threshold at -1 is
        off, and a widget the node lacks or an older graph leaves out (absent or None) takes its default. Not checked
        here: the consumer checks (``check``), naming the setting."""

        def given(name, default):
            value = widgets.get(name)
            return default if value is None else value

        min_foreground = widgets.get("min_foreground")
        return cls(
            by=given("rank_by", cls.by),
            cp_weight=float(given("cp_weight", cls.cp_weight)),
            pf_weight=float(given("pf_weight", cls.pf_weight)),
            min_cp=threshold_from_widget(widgets.get("min_cp")),
            min_pf=threshold_from_widget(widgets.get("min_pf")),
            reject_small_masks=bool(given("reject_small_masks", False)),
            min_foreground=None if min_foreground is None else float(min_foreground),
            on_uncertain=widgets.get("on_uncertain") or KEEP_BUT_MARK,
            on_blend=widgets.get("on_blend") or "report",
        )

    def ordering(self) -> "PassRules":
        """These rules' ranking key alone (key and weights, nothing rejected): how MaSC Pick orders what a person
        judges."""
        return type(self)(by=self.by, cp_weight=self.cp_weight, pf_weight=self.pf_weight)

    def check(self, by_name: str = "rank by") -> "PassRules":
        """These rules, or a one-line error naming the setting that cannot work (``by_name``: how the key's is
        named)."""
        if self.by not in RANK_KEYS:
            raise MascInputError(f"{by_name} '{self.by}' is unknown: use cp, pf or both")
        if self.on_uncertain not in UNCERTAIN_CHOICES:
            raise MascInputError(f"on_uncertain '{self.on_uncertain}' is unknown: use {', '.join(UNCERTAIN_CHOICES)}")
        if self.on_blend not in BLEND_CHOICES:
            raise MascInputError(f"on_blend '{self.on_blend}' is unknown: use {' or '.join(BLEND_CHOICES)}")
        return self

    def key(self, score: ImageScore) -> float | None:
        """The score's ranking key (``ranking_key``), None when undefined."""
        return ranking_key(score, self.by, self.cp_weight, self.pf_weight)

    @property
    def key_label(self) -> str:
        """What the key column holds (as in ranking tables)."""
        return key_label(self.by, self.cp_weight, self.pf_weight)

    def rank(
        self, scores: Sequence[ImageScore], *, top_k: int | None = None, reject: Mapping[int, str] | None = None
    ) -> "Ranking":
        """Rank ``scores`` by these rules and select the best ``top_k`` that pass (``rank``)."""
        return _ranked(scores, self.check(), top_k, reject)

    def describe(self, then: str = "") -> str:
        """The rules in a few words, for a report: the key, what passes, ``then`` (a caller's own part), non-default
        choices."""
        tests = [
            f"CP >= {self.min_cp:g}" if self.min_cp is not None else "",
            f"PF >= {self.min_pf:g}" if self.min_pf is not None else "",
        ]
        if self.reject_small_masks:
            tests.append(
                f"mask >= {100 * self.min_foreground:g}%" if self.min_foreground is not None else "mask filter"
            )
        passes = ", ".join(t for t in tests if t) or f"{self.key_label} defined"
        extra = "" if self.on_uncertain == KEEP_BUT_MARK else f"; uncertain: {self.on_uncertain}"
        return f"rank by {self.key_label}; pass: {passes}{then}{extra}"


def rank(
    scores: Sequence[ImageScore],
    *,
    top_k: int | None = None,
    reject: Mapping[int, str] | None = None,
    **rules,
) -> Ranking:
    """Rank scored outputs and select the best ``top_k`` that pass (all passing ones if ``top_k`` is None).

    The keyword form of ``PassRules(**rules).rank(scores, top_k=..., reject=...)``: ``rules`` are PassRules' fields
    (``by``, ``cp_weight``, ``pf_weight``, ``min_cp``, ``min_pf``, ``reject_small_masks``, ``min_foreground``: the
    mask-size flag re-decided from each output's ``foreground_fraction``, ``on_uncertain``: what an output whose band
    straddles a threshold becomes). ``reject``: output index -> why it does not pass whatever its scores (e.g. a
    multi-subject blend).
    """
    return PassRules(**rules).rank(scores, top_k=top_k, reject=reject)


def _ranked(
    scores: Sequence[ImageScore], rules: PassRules, top_k: int | None, reject: Mapping[int, str] | None
) -> Ranking:
    if top_k is not None:
        TOP_K.check(top_k)
    by, min_cp, min_pf, on_uncertain = rules.by, rules.min_cp, rules.min_pf, rules.on_uncertain
    items = []
    for score in scores:
        key = rules.key(score)
        reasons = []
        if key is None:
            missing = [
                name
                for name, value in (("CP", score.cp), ("PF", score.pf))
                if value is None and (by in (name.lower(), "both"))
            ]
            details = [
                r
                for r in (
                    score.cp_undefined if "CP" in missing else None,
                    score.pf_undefined if "PF" in missing else None,
                )
                if r
            ]
            reasons.append(f"{' and '.join(missing)} undefined" + (f" ({'; '.join(details)})" if details else ""))
        uncertain = []
        for name, value, band, threshold in (
            ("CP", score.cp, score.cp_band, min_cp),
            ("PF", score.pf, score.pf_band, min_pf),
        ):
            if threshold is None or value is None:
                if threshold is not None:
                    reasons.append(f"{name} undefined")
                continue
            straddles = band is not None and band[0] < threshold <= band[1]
            if straddles:
                uncertain.append(f"{name} band [{band[0]:+.4f}, {band[1]:+.4f}] straddles {threshold:g}")
            if value < threshold and not (straddles and on_uncertain == "accept"):
                reasons.append(f"{name} below {threshold:g}")
            elif straddles and on_uncertain == "reject":
                reasons.append(f"uncertain: {name} band straddles {threshold:g}")
        small = score.small_foreground
        if rules.min_foreground is not None and score.foreground_fraction is not None:
            small = score.foreground_fraction < rules.min_foreground
        if rules.reject_small_masks and small:
            reasons.append("mask below the size filter (subject probably not rendered)")
        if reject and score.index in reject:
            reasons.append(reject[score.index])
        unique = list(dict.fromkeys(reasons))
        items.append(
            RankedItem(
                index=score.index,
                cp=score.cp,
                pf=score.pf,
                key=key,
                passed=not unique,
                reasons=unique,
                foreground_fraction=score.foreground_fraction,
                uncertain=uncertain,
            )
        )
    items.sort(key=lambda item: (item.key is None, -(item.key if item.key is not None else 0.0), item.index))
    passing = [item.index for item in items if item.passed]
    selected = passing if top_k is None else passing[:top_k]
    return Ranking(items=items, selected=selected, by=by, cp_weight=rules.cp_weight, pf_weight=rules.pf_weight)
