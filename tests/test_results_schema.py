"""docs/results.md is generated from the result types and up to date; the files loadgen writes are checked
against it where they are written (tests/schema_check.py: a run in test_resume, shards and their merge in
test_shard_merge, a sweep's configuration in test_sweep)."""

from __future__ import annotations

import pathlib

import pytest

from loadgen.record import CellKey, Record
from loadgen.results.build_cell import build_cell
from loadgen.results.schema_doc import render
from tests.schema_check import assert_documented, field_types

pytestmark = pytest.mark.unit

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_docs_results_md_is_generated_from_the_types():
    assert (ROOT / "docs" / "results.md").read_text() == render(), \
        "docs/results.md is stale: python3 -m loadgen.results.schema_doc > docs/results.md"


def test_every_part_field_has_a_type_the_json_can_hold():
    assert field_types()["output_tok_s"] == (int, float, type(None))
    assert field_types()["requests"] == (dict,)
    assert all(object not in kinds for kinds in field_types().values())


def test_the_check_catches_an_undocumented_field_and_a_wrong_type():
    cell = build_cell(CellKey(60, 1), [Record("r", CellKey(60, 1), 0, t_sent_ns=1, t_end_ns=2)]).to_json()
    assert_documented({"schema": "loadgen.results/v1", "cells": [cell]})
    with pytest.raises(AssertionError, match="missing from docs/results.md"):
        assert_documented({"schema": "x", "cells": [cell | {"mystery": 1}]})
    with pytest.raises(AssertionError, match="another type"):
        assert_documented({"schema": "x", "cells": [cell | {"output_tok_s": "fast"}]})
