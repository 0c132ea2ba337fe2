"""How a dataset run is shown: its cells' prompt column says `data` (not `ctx 0`), its console line counts usable
and bad rows plainly, a row of another format is named in English, and compare/report give the max tokens the
rows asked for, not --max-tokens's default."""

from __future__ import annotations

import pytest

from loadgen.names import Api, DatasetFormat
from loadgen.report.compare import Run
from loadgen.report.table import row
from loadgen.results.comparable import max_tokens, mismatches
from loadgen.workload.dataset import Dataset, DatasetPrompts
from loadgen.workload.dataset_formats import DatasetRow, parse_rows
from loadgen.workload.textfile import BadRow
from tests.cells import typed

pytestmark = pytest.mark.unit

MESSAGES = [{"role": "user", "content": "hi"}]


def _dataset(*lengths: int | None, bad: int = 0) -> Dataset:
    rows = [DatasetRow(line=i + 1, messages=MESSAGES, max_tokens=n) for i, n in enumerate(lengths)]
    return Dataset("d.jsonl", DatasetFormat.OPENAI_CHAT, rows, [BadRow(90 + i, "not a JSON object") for i in range(bad)])


def _sizing(ds: Dataset) -> dict:
    return DatasetPrompts("r", 0, "m", Api.OPENAI_CHAT, ds, counter=None).describe()


def _doc(ds: Dataset, asked: int = 512) -> dict:
    return {"args": {"max_tokens": asked}, "prompt_sizing": _sizing(ds), "cells": [{}]}


def test_the_console_line_counts_usable_and_bad_rows_plainly():
    assert "2 rows usable (2 rows bad, left out), 2 with their own output length" in _dataset(64, 32, bad=2).describe()
    assert "3 rows usable (no bad rows), 2 with their own output length" in _dataset(64, 32, None).describe()


def test_a_row_of_another_format_is_named_with_its_article():
    _, _, bad = parse_rows('{"prompt": "a"}\n{"messages": [{"role": "user", "content": "b"}]}\n', "category")
    assert [b.reason for b in bad] == ["an OpenAI chat row in a prompt file"]
    _, _, bad = parse_rows('{"messages": [{"role": "user", "content": "b"}]}\n{"prompt": "a"}\n', "category")
    assert [b.reason for b in bad] == ["a prompt row in an OpenAI chat file"]


def test_max_tokens_are_the_rows_own_when_they_give_them():
    assert _sizing(_dataset(64, 32))["row_max_tokens"] == {"rows": 2, "min": 32, "max": 64}
    assert max_tokens(_doc(_dataset(64, 32))) == "per row 32–64"
    assert max_tokens(_doc(_dataset(64, None))) == "per row 64, else 512"
    assert max_tokens(_doc(_dataset(None, None))) == 512
    assert max_tokens({"args": {"max_tokens": 256}}) == 256  # a synthetic run


def test_compare_names_the_rows_max_tokens_when_two_dataset_runs_differ():
    a, b = Run("a", "a.json", _doc(_dataset(64, 32))), Run("b", "b.json", _doc(_dataset(16, 16)))
    assert mismatches([a, b]) == ["max tokens: a=per row 32–64, b=per row 16"]
    assert mismatches([a, Run("a2", "a2.json", _doc(_dataset(32, 64)))]) == []


def test_a_dataset_cell_shows_data_in_the_prompt_column():
    cell = {"context_tokens": 0, "concurrency": 2, "requests": {"ok": 2, "failed": 0}}
    assert row(typed(cell)).split()[:3] == ["data", "2", "2/0"]
    assert row(typed(cell | {"context_tokens": 60})).split()[0] == "60"
