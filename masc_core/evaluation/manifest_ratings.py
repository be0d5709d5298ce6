"""A manifest row's human ratings: ``human_cp`` / ``human_pf`` (one rating, or one pooled over raters) or one
column per rater (``human_cp.<rater>``; an empty cell = not rated by that rater; in JSONL also an object
``{"<rater>": rating}``). The two forms cannot be mixed for one aspect."""

from __future__ import annotations

import math
from typing import Any

from ..errors import MascInputError
from .manifest_formats import fail

ASPECTS = ("cp", "pf")
RATING_PREFIX = "human_"


class Raters:
    """The raters of one manifest, per aspect, as its rows are read: the per-rater columns' names (header order,
    then names first met in a JSONL object), and whether the pooled column was used."""

    def __init__(self, path: str, columns: list[str]):
        self.path = path
        self.names: dict[str, list[str]] = {aspect: [] for aspect in ASPECTS}
        self.pooled = {aspect: False for aspect in ASPECTS}
        for column in columns:
            for aspect in ASPECTS:
                base = RATING_PREFIX + aspect
                if column.startswith(base + "."):
                    name = column[len(base) + 1 :].strip()
                    if not name:
                        raise fail(path, "line 1", f"column '{column}' names no rater: use {base}.<rater>")
                    self.names[aspect].append(name)

    def row(self, line: int, record: dict) -> dict[str, dict[str, float]]:
        """The row's ratings per aspect (rater -> rating; "" for the pooled column)."""
        ratings: dict[str, dict[str, float]] = {}
        for aspect in ASPECTS:
            given: dict[str, float] = {}
            column = RATING_PREFIX + aspect
            value = record.get(column)
            if isinstance(value, dict):  # JSONL shorthand: {"<rater>": rating}
                for rater, rating in value.items():
                    rater = str(rater).strip()
                    number = self._rating(line, f"{column}.{rater}", rating)
                    if number is not None:
                        given[rater] = number
                        if rater not in self.names[aspect]:
                            self.names[aspect].append(rater)
            else:
                number = self._rating(line, column, value)
                if number is not None:
                    given[""] = number
                    self.pooled[aspect] = True
            for rater in self.names[aspect]:
                key = f"{column}.{rater}"
                if key in record:
                    number = self._rating(line, key, record[key])
                    if number is not None:
                        given[rater] = number
            if given:
                ratings[aspect] = given
        return ratings

    def check(self) -> dict[str, list[str]]:
        """After the last row: one form per aspect; the rater names per aspect."""
        for aspect in ASPECTS:
            if self.pooled[aspect] and self.names[aspect]:
                raise MascInputError(
                    f"manifest '{self.path}' has both human_{aspect} ratings and per-rater human_{aspect}.<rater> "
                    "ratings: give one pooled column or one column per rater, not both"
                )
        return self.names

    def _rating(self, line: int, column: str, value: Any) -> float | None:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        if isinstance(value, bool):
            raise fail(self.path, f"line {line}, column '{column}'", "expected a number, got true/false")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise fail(self.path, f"line {line}, column '{column}'", f"expected a number, got {value!r}") from None
        if not math.isfinite(number):
            raise fail(self.path, f"line {line}, column '{column}'", f"expected a finite number, got {value!r}")
        return number
