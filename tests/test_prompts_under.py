"""A cell measured again (the drift check's control, a search's) takes the run's prompts under its own run id,
whatever the workload: a session plan's run id is its rows' (`run/cell.prompts_under`)."""

from __future__ import annotations

import pytest

from loadgen.config import RunConfig
from loadgen.names import Api, DatasetFormat
from loadgen.run.cell import CellMeasurer, prompts_under
from loadgen.workload.dataset import Dataset, DatasetPrompts
from loadgen.workload.dataset_formats import DatasetRow
from loadgen.workload.sessions import SessionPrompts

pytestmark = pytest.mark.unit


def _rows(run_id: str = "run1") -> DatasetPrompts:
    rows = [DatasetRow(line=1, messages=[{"role": "user", "content": "hi"}], max_tokens=4)]
    return DatasetPrompts(run_id, 0, "m", Api.OPENAI_CHAT, Dataset("d.jsonl", DatasetFormat.OPENAI_CHAT, rows, []),
                          counter=None)


def test_dataset_prompts_move_to_the_new_run_id():
    rows = _rows()
    again = prompts_under(rows, "run1-control")
    assert isinstance(again, DatasetPrompts) and again.run_id == "run1-control" and again.dataset is rows.dataset
    assert rows.run_id == "run1"  # the run's own prompts are left as they were


def test_session_prompts_move_to_the_new_run_id_through_their_rows():
    plan = SessionPrompts(_rows(), think_time_s=0.5, reference_tokens={(1, 0): 7})
    again = prompts_under(plan, "run1-control")
    assert isinstance(again, SessionPrompts) and again.rows.run_id == "run1-control"
    assert again.think_time_s == 0.5 and again.reference_tokens == {(1, 0): 7} and plan.rows.run_id == "run1"


def test_a_sessions_runs_measurer_has_a_twin_under_another_run_id():
    cfg = RunConfig(url="http://127.0.0.1:1")
    measurer = CellMeasurer(cfg, "run1", SessionPrompts(_rows()), None, None, [], [], None, None)
    twin = measurer.under("run1-control")
    assert twin.run_id == "run1-control" and twin.prompts.rows.run_id == "run1-control"
    assert measurer.prompts.rows.run_id == "run1"
