"""The views read the typed cell (`CellResult` and its parts), not the dict its JSON is: a renamed field is then an
error where it is read, not a silent None in a table. Two checks: reading a typed cell by its JSON field names
(`results/cell_view.py`), and a count of the `.get("…")` reads of cell dicts left in the source (AST).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

from loadgen.record import CellKey, Record
from loadgen.report import plot_data
from loadgen.results.build_cell import build_cell
from loadgen.results.cell_result import JUDGED, KEY_FIELDS, RESERVED, from_json, part_keys
from loadgen.results.cell_status import measured, problem, unmeasured
from loadgen.results.cell_view import figure, number, value

pytestmark = pytest.mark.unit

ROOT = pathlib.Path(__file__).resolve().parent.parent
CELL_KEYS = set(part_keys()) | set(KEY_FIELDS) | set(JUDGED) | set(RESERVED) | {"run_id"}
# the dicts that share a cell's top-level keys but are not cells, by the names loadgen gives them: a results or
# sweep document (its run_id, its sweep's attempts), a comparison row or a record line (run_id, status, slo), a
# sweep summary's configuration (status), a prompt category's figures (output_tok_s, accept_length), the parts
# of an SSE chunk (usage's cached_tokens, a delta's reasoning, an error object), a run's arguments and target
NOT_CELLS = {"doc", "d", "row", "r", "conf", "fig", "figures", "ref", "details", "delta", "meta", "obj", "args",
             "target", "plan"}
# reading a cell's JSON into its type is where `.get` belongs: every `from_json`, and these helpers of it
READERS = {("loadgen/results/legacy_incidents.py", "legacy_incidents"),
           ("loadgen/results/legacy_incidents.py", "stored_verdict"),
           ("loadgen/record.py", "cell_key")}
# the builder reads the figures of records (`metrics.cell.summarize`) before a cell exists; nothing in metrics/
# can hold a CellResult (it lives a layer above)
BUILDER = ("loadgen/metrics/", "loadgen/results/build_cell.py")
MOST_CELL_DICT_READS = 10


def _literal_key(call: ast.Call) -> bool:
    return bool(call.args) and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)


def _is_cell_read(node: ast.AST) -> bool:
    """`X.get("k", …)` with k a top-level key of a cell's JSON, X (`x or {}` read as x) not a block inside a dict
    (`x.get("slo")`, `x["slo"]`: a value reached by a literal key) and not named (`x`, `….x`) as one of the other
    dicts (`NOT_CELLS`); an element of a collection (`cells[key]`, `r.cells.get(key)`) is a cell."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and _literal_key(node) and node.args[0].value in CELL_KEYS):
        return False
    receiver = node.func.value
    while isinstance(receiver, ast.BoolOp):
        receiver = receiver.values[0]
    if isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute) and _literal_key(receiver):
        return False
    if isinstance(receiver, ast.Subscript) and isinstance(receiver.slice, ast.Constant):
        return False
    if isinstance(receiver, ast.Attribute) and receiver.attr in CELL_KEYS:
        return False  # a typed part's field (`cell.noise.intervals`): a block of figures
    name = receiver.id if isinstance(receiver, ast.Name) else receiver.attr if isinstance(receiver, ast.Attribute) \
        else None
    return name not in NOT_CELLS


def cell_dict_reads() -> list[str]:
    """Every `.get("…")` read of a cell dict in loadgen/ and exporters/, as "path:line: code".

    The rule, precisely: a call `X.get("k", …)` whose first argument is a string literal naming a top-level key of
    a cell's JSON (a field of a part of `CellResult`, a key field, run_id, status, error, warnings, incidents, slo,
    correctness) is a read of a cell dict, unless
    - it is inside a function named `from_json`, or one of `READERS` (reading a cell's JSON into its type);
    - it is in the builder (`BUILDER`: the figures of records before a cell exists);
    - its receiver is a value reached by a literal key (`(cell.get("slo") or {}).get("met")` counts once, for
      "slo": the outer read is of the slo block) or by a typed part's field (`cell.noise.intervals`), or is
      named (`x`, `….x`) as one of `NOT_CELLS`.
    A receiver of any other name counts, whatever it is named: a new view that digs in a dict is counted.
    """
    found = []
    for top in ("loadgen", "exporters"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(BUILDER):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), rel)
            skipped = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                       and (f.name == "from_json" or (rel, f.name) in READERS) for n in ast.walk(f)}
            found += [f"{rel}:{n.lineno}: {ast.unparse(n)}" for n in ast.walk(tree)
                      if id(n) not in skipped and _is_cell_read(n)]
    return found


def test_fewer_than_ten_reads_of_cell_dicts_remain():
    found = cell_dict_reads()
    assert len(found) < MOST_CELL_DICT_READS, "read the typed cell (cell_view, CellResult's parts):\n" + "\n".join(found)


def test_the_count_sees_a_read_of_a_cell_dict_and_leaves_the_others():
    def reads(src: str) -> int:
        return sum(_is_cell_read(n) for n in ast.walk(ast.parse(src)))
    assert reads("cell.get('ttft_s')") == reads("anything.get('status', 'ok')") == 1
    assert reads("(cell.get('slo') or {}).get('met')") == 1  # the slo block, once
    assert reads("(r.cells.get(key) or {}).get('by_category')") == 1  # a cell of a run's cells
    assert reads("doc.get('run_id')") == reads("(run.doc.get('sweep') or {}).get('attempts')") == 0
    assert reads("run.doc.get('run_id')") == 0
    assert reads("cell.get('p50')") == reads("row['slo'].get('met')") == 0
    assert reads("(cell.noise.intervals or {}).get('output_tok_s')") == 0  # a typed part's block


def _cell(ok: int = 4, tok_s: float = 100.0, concurrency: int = 2):
    key = CellKey(60, concurrency)
    recs = [Record(f"r{i}", key, i, t_sent_ns=i * 10**9, t_first_token_ns=i * 10**9 + 10**8,
                   t_end_ns=i * 10**9 + 5 * 10**8, completion_tokens=50) for i in range(ok)]
    return build_cell(key, recs)


def test_a_typed_cell_is_read_by_its_json_names():
    cell = _cell()
    data = cell.to_json()
    assert value(cell, "output_tok_s") == data["output_tok_s"] == cell.throughput.output_tok_s
    assert figure(cell, "ttft_s.p50") == data["ttft_s"]["p50"]
    assert value(cell, "concurrency") == 2 and value(cell, "status") == data["status"]
    assert figure(cell, "power.mean_w_total") is None and number(cell, "requests.ok") == 4
    with pytest.raises(KeyError, match="output_tokps"):
        value(cell, "output_tokps")  # a misspelt field is an error, never a silent None


def test_the_views_read_a_cell_read_back_from_its_json_as_the_built_one():
    cell = _cell()
    data = cell.to_json()
    again = from_json(data)
    assert again.to_json() == data
    assert (problem(again), unmeasured(again), measured(again)) == (problem(cell), unmeasured(cell), measured(cell))
    assert plot_data.path("output_tok_s")(again) == plot_data.path("output_tok_s")(cell)
