"""A cell's result is finished in one place: nothing outside the builder modules changes a built `CellResult`
(docs/architecture.md, "A cell's result"). Whoever learns something of a cell returns it as `CellFindings`
and the builder makes a new result (`build_cell.amended`).

The walk is of the source (AST), so it holds for code no test runs. It flags, outside `BUILDERS`:
- an assignment to a field of a result or of one of its parts (`result.incidents = …`, `result.load.ramp = …`,
  `result.requests.requests_not_sent += …`);
- a mutating call on one (`result.add(IncidentKind…)`, `result.warnings.append(…)`,
  `result.load.attempts.append(…)`);
- `setattr` in a module that imports the result's types, and `dataclasses.replace` of a result's parts.

And the whole `RunConfig` reaches only the parts that need most of it: every other part is given its own
sub-configuration (a `ClientConfig`, `VerifyConfig`, `SloConfig`…); `WHOLE_CONFIG_PARAMETERS` is the most
parameters outside `loadgen/cli/` that may still be annotated `RunConfig`.
"""

from __future__ import annotations

import ast
import pathlib
from dataclasses import fields

import pytest

from loadgen.results.cell_result import PARTS, CellResult

pytestmark = pytest.mark.unit

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "loadgen"
# the builder of a cell, the result's own module (reading files), and the two that make one result of
# several built ones (repeats of a cell, shards of a run)
BUILDERS = {"loadgen/results/build_cell.py", "loadgen/results/cell_result.py", "loadgen/results/repeats.py",
            "loadgen/results/merge.py"}
TOP = {f.name for f in fields(CellResult)} - {"key"}
PART_FIELDS = {name: {f.name for f in fields(cls)} for name, cls in PARTS.items()}
MUTATORS = {"append", "extend", "insert", "update", "pop", "remove", "clear", "setdefault", "add"}
WHOLE_CONFIG_PARAMETERS = 12  # parameters annotated RunConfig outside loadgen/cli/ (and config.py itself)


def _sources() -> list[tuple[str, ast.Module]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        out.append((rel, ast.parse(path.read_text(encoding="utf-8"), rel)))
    return out


def _chain(node: ast.expr) -> list[str]:
    """`a.b.c` → ['a', 'b', 'c'] (the root's name first; '?' for a root that is not a name)."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    names.append(node.id if isinstance(node, ast.Name) else "?")
    return names[::-1]


def _result_field(node: ast.expr, holds_results: bool) -> bool:
    """Whether `node` names a field of a result (`x.incidents`, in a module that holds results) or of one of
    its parts (`x.load.ramp`); a run's settings (`cfg.workload.…`) share some of those names."""
    chain = _chain(node)
    if "cfg" in chain or "config" in chain:
        return False
    if len(chain) >= 3 and chain[-2] in PART_FIELDS and chain[-1] in PART_FIELDS[chain[-2]]:
        return True
    return holds_results and len(chain) == 2 and chain[0] not in ("self", "cls") and chain[1] in TOP


def _imports_results(tree: ast.Module) -> bool:
    """The module imports the results' types or their builder (anything of `loadgen.results`)."""
    return any(isinstance(n, ast.ImportFrom) and (n.module or "").startswith("loadgen.results")
               for n in ast.walk(tree))


def _changes(rel: str, tree: ast.Module) -> list[str]:
    found = []
    holds = _imports_results(tree)
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        found += [f"{rel}:{node.lineno}: assigns {'.'.join(_chain(t))}" for t in targets if _result_field(t, holds)]
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in MUTATORS and _result_field(f.value, holds):
            found.append(f"{rel}:{node.lineno}: {'.'.join(_chain(f))}(…)")
        elif isinstance(f, ast.Attribute) and f.attr == "add" and node.args and _incident(node.args[0]):
            found.append(f"{rel}:{node.lineno}: {'.'.join(_chain(f))}(an incident)")
        elif isinstance(f, ast.Name) and f.id == "setattr" and holds:
            found.append(f"{rel}:{node.lineno}: setattr in a module that holds cell results")
        elif (isinstance(f, ast.Name) and f.id == "replace" or isinstance(f, ast.Attribute) and f.attr == "replace") \
                and {k.arg for k in node.keywords} & (TOP - {"run_id"}):
            found.append(f"{rel}:{node.lineno}: replace(…) of a result's parts")
    return found


def _incident(arg: ast.expr) -> bool:
    chain = _chain(arg) if isinstance(arg, ast.Attribute) else []
    return "IncidentKind" in chain or isinstance(arg, ast.Call) and _chain(arg.func)[-1] == "Incident"


def test_nothing_outside_the_builder_changes_a_built_cell_result():
    changes = [c for rel, tree in _sources() if rel not in BUILDERS for c in _changes(rel, tree)]
    assert changes == [], "a built result changes only through build_cell.amended (CellFindings):\n" + \
        "\n".join(changes)


def test_the_walk_sees_each_kind_of_change():
    code = ast.parse("result.add(IncidentKind.DRIFTED, 'x')\nresult.load.attempts = []\n"
                     "result.warnings.append('w')\nresult.requests.requests_not_sent += 1\n"
                     "dataclasses.replace(result, incidents=[])\nresult.telemetry.client.update({})\n"
                     "from loadgen.results.cell_result import CellResult\nsetattr(result, 'slo', None)\n"
                     "self.cfg.workload.shared_prefix = None\nself.run_id = 'r'\n")
    assert sorted(c.split(": ", 1)[1] for c in _changes("x.py", code)) == sorted([
        "result.add(an incident)", "assigns result.load.attempts", "result.warnings.append(…)",
        "assigns result.requests.requests_not_sent", "replace(…) of a result's parts",
        "result.telemetry.client.update(…)", "setattr in a module that holds cell results"])


def _whole_config_parameters() -> list[str]:
    found = []
    for rel, tree in _sources():
        if rel.startswith("loadgen/cli/") or rel == "loadgen/config.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                found += [f"{rel}:{node.lineno}: {node.name}({a.arg})" for a in args
                          if a.annotation is not None and ast.unparse(a.annotation).strip("'\"") == "RunConfig"]
    return found


def test_each_part_gets_its_own_sub_configuration():
    whole = _whole_config_parameters()
    assert len(whole) <= WHOLE_CONFIG_PARAMETERS, "give these their sub-configuration:\n" + "\n".join(whole)
