"""Logs left running for a night: no live formula in a CSV, no row lost or doubled beside another writer or
after a crash at any byte, a foreign file never modified, eval resuming over a torn UTF-8 character, and
records split on newline only."""

from __future__ import annotations

import csv
import io
import json
import multiprocessing
import os

import pytest

from crafted import cuts
from masc_core.errors import MascInputError
from masc_core.evaluation.records import EvalRecord, read_records, record_line, records_from_lines
from masc_core.evaluation.score_log import LOG_COLUMNS, append_rows, log_rows, log_text
from masc_core.metric.scores import ImageScore, ReferenceInfo, ScoreBatch, ScoreContext

FORMULAS = ['=HYPERLINK("http://x","y")', "+1+2", "-2+3", "@SUM(A1)", "\tx", "\rx", "'quoted", "=cmd|' /C calc'!A0"]


def batch(
    prompt: str = "a sks dog in the snow", subject: str = "sks dog", count: int = 2, cp: float = -0.25
) -> ScoreBatch:
    scores = [
        ImageScore(
            index=i,
            cp=cp + 0.01 * i,
            pf=-0.5,
            cp_per_reference=[cp],
            prompt=prompt,
            encoded_prompt=prompt,
            subject_found=True,
            foreground_fraction=0.3,
        )
        for i in range(count)
    ]
    context = ScoreContext(
        node="MaSCScore",
        subject=subject,
        encoder={"model": "tiny", "digest": "abc"},
        seeds=list(range(count)),
        verdicts=["accepted"] * count,
    )
    return ScoreBatch(scores=scores, references=[ReferenceInfo(0, (4, 4), 0.3, 5, False)], context=context)


def read_csv(path: str) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def read_jsonl(path: str) -> list[dict]:
    with open(path, "rb") as handle:
        return [json.loads(line) for line in handle.read().split(b"\n") if line]


# ---------------------------------------------------------------- spreadsheets


@pytest.mark.parametrize("text", FORMULAS)
def test_csv_text_cells_never_start_a_formula_and_numbers_stay_numbers(tmp_path, text):
    path = str(tmp_path / "night.csv")
    rows = log_rows(batch(prompt=text, subject=text), time="t", run=text, method=text)
    append_rows(path, rows)
    written = read_csv(path)
    for column in ("prompt", "encoded_prompt", "subject", "method", "run", "id"):
        cell = written[0][column]
        assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), (column, cell)
        assert cell == "'" + rows[0][column], (column, cell)  # one quote added: a reader drops exactly one
    assert written[0]["cp"] == "-0.25" and written[0]["pf"] == "-0.5" and written[0]["cp_per_reference"] == "-0.25"


def test_plain_text_is_written_as_it_is(tmp_path):
    path = str(tmp_path / "night.csv")
    append_rows(path, log_rows(batch(prompt='a dog, "quoted"\nover two lines'), time="t", run="r"))
    assert read_csv(path)[0]["prompt"] == 'a dog, "quoted"\nover two lines'


def test_evals_results_csv_is_spreadsheet_safe_too(tmp_path):
    from masc_core.evaluation.records import csv_text

    record = EvalRecord(
        row=0,
        id="=1+1",
        method="@x",
        seed=None,
        subject="-dog",
        prompt="=2",
        encoded_prompt="+3",
        subject_found=True,
        ref=["r.png"],
        ref_mask=["m.png"],
        out="o.png",
        out_mask=None,
        metrics={"cp": -0.5, "pf": None},
    )
    row = next(csv.DictReader(io.StringIO(csv_text([record], ["cp", "pf"]))))
    assert (row["id"], row["method"], row["subject"], row["prompt"], row["encoded_prompt"]) == (
        "'=1+1",
        "'@x",
        "'-dog",
        "'=2",
        "'+3",
    )
    assert row["cp"] == "-0.5"


# ---------------------------------------------------------------- two writers


def _writer(path: str, name: str, appends: int) -> None:
    for index in range(appends):
        append_rows(
            path, log_rows(batch(prompt=f"{name} line one\nline two", count=3), time="t", run=f"{name}-{index}")
        )


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_two_writers_on_one_log_lose_and_double_nothing(tmp_path, suffix):
    """Two ComfyUI instances on one output folder: every row lands once, the CSV header once.

    Not a timing test: whatever the interleaving, the lock makes each append whole; the verdict is the
    same on a loaded machine (the writers only take longer).
    """
    path = str(tmp_path / ("night" + suffix))
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_writer, args=(path, name, 150)) for name in ("a", "b", "c")]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(timeout=600)
        assert writer.exitcode == 0
    rows = read_csv(path) if suffix == ".csv" else read_jsonl(path)
    ids = [row["id"] for row in rows]
    assert len(ids) == 3 * 150 * 3 and len(set(ids)) == len(ids)
    if suffix == ".csv":
        with open(path, encoding="utf-8") as handle:
            assert handle.read().count(",".join(LOG_COLUMNS)) == 1


# ---------------------------------------------------------------- a crash at any byte


def _cut_then_append(path: str, data: bytes, cut: int) -> list[dict]:
    with open(path, "wb") as handle:
        handle.write(data[:cut])
    append_rows(path, log_rows(batch(prompt="after\nthe crash"), time="t", run="after"))
    return read_csv(path) if path.endswith(".csv") else read_jsonl(path)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_crash_at_any_byte_of_the_last_append_loses_only_that_append(tmp_path, suffix):
    """Two appends, the second (with a multi-line prompt) cut at every byte, then one more append."""
    path = str(tmp_path / ("night" + suffix))
    append_rows(path, log_rows(batch(prompt="first\nrun", count=2), time="t", run="first"))
    kept = os.path.getsize(path)
    append_rows(path, log_rows(batch(prompt='second\n"quoted"\nrun', count=2), time="t", run="second"))
    data = open(path, "rb").read()
    whole = len(data)
    for cut, _ in cuts(data, kept):
        runs = [row["run"] for row in _cut_then_append(path, data, cut)]
        expected = ["first"] * 2 + (["second"] * 2 if cut == whole else []) + ["after"] * 2
        if suffix == ".jsonl" and cut < whole:
            # JSON lines: each row is its own record, so the rows the crash completed are kept.
            second_rows = data[kept:cut].count(b"\n")
            expected = ["first"] * 2 + ["second"] * second_rows + ["after"] * 2
        elif suffix == ".csv" and cut < whole:
            second_rows = _complete_csv_rows(data[kept:cut])
            expected = ["first"] * 2 + ["second"] * second_rows + ["after"] * 2
        assert runs == expected, (cut, runs)


def _complete_csv_rows(text: bytes) -> int:
    """Rows whose record ends inside ``text``: newlines outside quotes."""
    quoted, count = False, 0
    for byte in text:
        if byte == ord('"'):
            quoted = not quoted
        elif byte == ord("\n") and not quoted:
            count += 1
    return count


def test_a_crash_inside_the_very_first_append_leaves_a_log_that_still_takes_rows(tmp_path):
    for suffix in (".csv", ".jsonl"):
        path = str(tmp_path / ("first" + suffix))
        append_rows(path, log_rows(batch(), time="t", run="first"))
        data = open(path, "rb").read()
        for cut, _ in cuts(data):
            rows = _cut_then_append(path, data, cut)
            assert [row["run"] for row in rows][-2:] == ["after", "after"], (suffix, cut)
            assert all(row["run"] in ("first", "after") for row in rows)


def test_a_csv_torn_inside_a_multiline_prompt_does_not_swallow_later_rows(tmp_path):
    path = str(tmp_path / "night.csv")
    append_rows(path, log_rows(batch(count=1), time="t", run="one"))
    with open(path, "a", encoding="utf-8", newline="") as handle:
        handle.write('t,torn,MaSCScore,,0,torn#0,,0,sks dog,"a prompt over\nthree lines\nand cut h')  # the crash
    append_rows(path, log_rows(batch(count=1), time="t", run="two"))
    assert [row["run"] for row in read_csv(path)] == ["one", "two"]


# ---------------------------------------------------------------- files that are not ours


@pytest.mark.parametrize(
    "name,content",
    [
        ("notes.csv", b"shopping list\nmilk\neggs (no newline at the end)"),
        ("notes.jsonl", b'{"event": "x"}\n{"event": "y", "cut'),
        ("notes2.jsonl", b"not json at all\nsecond line"),
        ("binary.csv", bytes(range(256))),
        ("other.csv", b"time,run\n1,2\n3,4"),
    ],
)
def test_a_file_that_is_not_a_log_is_refused_and_left_byte_for_byte(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(
        MascInputError, match=f"filename '{name}' is not a MaSC score log.*the file was left as it was"
    ) as refused:
        append_rows(str(path), log_rows(batch(), time="t", run="r"))
    assert "\n" not in str(refused.value)
    assert path.read_bytes() == content


# ---------------------------------------------------------------- eval's results.jsonl


def _record(row: int, prompt: str) -> EvalRecord:
    return EvalRecord(
        row=row,
        id=None,
        method="m",
        seed=None,
        subject="dog",
        prompt=prompt,
        encoded_prompt=prompt,
        subject_found=True,
        ref=["r.png"],
        ref_mask=["m.png"],
        out="o.png",
        out_mask=None,
        metrics={"cp": 0.5, "pf": 0.1},
    )


def test_results_are_read_back_over_a_line_torn_inside_a_utf8_character(tmp_path):
    path = tmp_path / "results.jsonl"
    whole = record_line(_record(0, "un café")).encode("utf-8")
    torn = record_line(_record(1, "crème brûlée")).encode("utf-8")
    cut = torn.index("è".encode("utf-8")) + 1  # inside the two bytes of è
    path.write_bytes(whole + torn[:cut])
    assert list(read_records(str(path))) == [0]
    path.write_bytes(whole + b'{"row": 5, "prompt": "\xff\xfe"}\n' + torn)  # a damaged line in the middle
    assert sorted(read_records(str(path))) == [0, 1]


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085", "\x0b", "\x0c", "\x1c"])
def test_records_split_on_newline_only(separator):
    """A prompt with a character str.splitlines breaks at: the chunk's records come back whole."""
    records = [_record(0, f"a dog{separator}on the beach"), _record(1, "a cat")]
    text = "".join(record_line(r) for r in records)
    assert [r.prompt for r in records_from_lines(text)] == [f"a dog{separator}on the beach", "a cat"]


def test_log_text_is_what_append_rows_writes(tmp_path):
    rows = log_rows(batch(), time="t", run="r")
    path = str(tmp_path / "a.jsonl")
    append_rows(path, rows)
    assert open(path, encoding="utf-8").read() == log_text(path, rows)


def test_a_results_log_torn_inside_its_first_few_bytes_is_still_recognised(tmp_path):
    from masc_core.evaluation.records import open_results_log

    for torn in (b"{", b'{"ro', b'{"row": 3, "pro'):
        path = tmp_path / "results.jsonl"
        path.write_bytes(torn)
        with open_results_log(str(path)) as log:
            log.write(record_line(_record(0, "a dog")))
        assert list(read_records(str(path))) == [0]
