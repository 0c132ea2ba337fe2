"""The architecture's rules, checked on the source (ast), so a change that breaks one fails here.

- Composition, not patching: no module assigns a function, lambda or bound method to an attribute of an
  object (`runner.run = self.run`) and nothing calls `setattr` with behaviour. Data attributes are fine.
- The core (`loadgen/` outside `loadgen/cli/`) never imports `exporters/`; the CLI wires exporters in, and
  nothing outside the CLI imports it.
- Layers: a package of loadgen imports only its own layer and those below it (`LAYERS`, mirrored by
  docs/architecture.md), and no two packages import each other; run/ imports nothing of report/.
- Sizes: a product module ≤ 300 lines, a function ≤ 40 lines, unless the module docstring names it under
  "Size exception:" with the reason.
"""

from __future__ import annotations

import ast
import functools
import pathlib
from enum import StrEnum

import pytest

from loadgen import names

pytestmark = pytest.mark.unit

ROOT = pathlib.Path(__file__).resolve().parent.parent
PRODUCT = sorted([*ROOT.glob("loadgen/**/*.py"), *ROOT.glob("exporters/**/*.py")])
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 40


@functools.cache  # every rule reads every module: each is parsed once (nothing here changes a tree)
def _tree(path: pathlib.Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _rel(path: pathlib.Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def _local_functions(tree: ast.AST) -> set[str]:
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def _is_behaviour(value: ast.AST, functions: set[str]) -> bool:
    """A value that is code: a lambda, a local function's name, or a method of some object (`self.run`)."""
    if isinstance(value, ast.Lambda):
        return True
    if isinstance(value, ast.Name):
        return value.id in functions
    if isinstance(value, ast.Attribute):  # obj.method, where method is defined in this module
        return value.attr in functions and not value.attr.startswith("__")
    if isinstance(value, ast.Tuple):
        return any(_is_behaviour(v, functions) for v in value.elts)
    return False


def rebindings(path: pathlib.Path) -> list[str]:
    tree = _tree(path)
    functions = _local_functions(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = [t for tgt in node.targets for t in (tgt.elts if isinstance(tgt, ast.Tuple) else [tgt])]
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value] * len(targets)
            for target, value in zip(targets, values):
                if isinstance(target, ast.Attribute) and not _own_callback(target) \
                        and _is_behaviour(value, functions):
                    found.append(f"{_rel(path)}:{node.lineno}: {ast.unparse(target)} = {ast.unparse(value)}")
        elif _is_setattr(node) and _is_behaviour(node.args[2], functions):
            found.append(f"{_rel(path)}:{node.lineno}: {ast.unparse(node)}")
    return found


def _is_setattr(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
            and len(node.args) == 3)


def _own_callback(target: ast.Attribute) -> bool:
    """`self.x = …` inside a class sets the object's own state (a callback it was given), not another's."""
    return isinstance(target.value, ast.Name) and target.value.id == "self"


def test_no_module_rebinds_behaviour_of_another_object():
    found = [hit for path in PRODUCT for hit in rebindings(path)]
    assert found == [], "behaviour patched onto objects:\n" + "\n".join(found)


def test_the_scan_catches_the_patterns_it_forbids(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("class P:\n    def run(self):\n        pass\n\n"
                   "def install(runner, p):\n    runner.run = p.run\n    runner.drive = lambda: 1\n"
                   "    setattr(runner, 'go', install)\n    runner.label = 'ok'\n")
    assert len(rebindings(bad)) == 3


def _imports(tree: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def test_the_core_never_imports_exporters():
    core = [p for p in PRODUCT if _rel(p).startswith("loadgen/") and not _rel(p).startswith("loadgen/cli/")]
    found = [f"{_rel(p)} imports {m}" for p in core for m in _imports(_tree(p)) if m.split(".")[0] == "exporters"]
    assert found == []


def test_only_the_cli_knows_the_cli():
    """Dependencies point inward: nothing outside loadgen/cli/ imports it (the sweep gets the CLI's run builder
    as an argument)."""
    outside = [p for p in PRODUCT if not _rel(p).startswith("loadgen/cli/") and _rel(p) != "loadgen/__main__.py"]
    found = [f"{_rel(p)} imports {m}" for p in outside for m in _imports(_tree(p))
             if m == "loadgen.cli" or m.startswith("loadgen.cli.")]
    assert found == []


def _exceptions(tree: ast.Module) -> str:
    doc = ast.get_docstring(tree) or ""
    return doc.split("Size exception:", 1)[1] if "Size exception:" in doc else ""


@pytest.mark.parametrize("path", PRODUCT, ids=_rel)
def test_module_and_function_sizes(path):
    tree = _tree(path)
    allowed = _exceptions(tree)
    lines = len(path.read_text().splitlines())
    problems = []
    if lines > MAX_MODULE_LINES and "module" not in allowed:
        problems.append(f"{lines} lines (> {MAX_MODULE_LINES})")
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            n = node.end_lineno - node.lineno + 1
            if n > MAX_FUNCTION_LINES and node.name not in allowed:
                problems.append(f"{node.name}() is {n} lines (> {MAX_FUNCTION_LINES})")
    assert problems == [], f"{_rel(path)}: " + "; ".join(problems)


# ---- layers ------------------------------------------------------------------------------------------------
# The packages of loadgen from the bottom up (docs/architecture.md, "Layers", mirrors this list). A package is
# the first folder under loadgen/, or a top-level module by its name (`loadgen` itself: its __init__). A
# package may import its own layer and the layers below it, never one above. Imports under
# `if TYPE_CHECKING:` count: a type named in a signature is a dependency of the reader too.
LAYERS: list[set[str]] = [
    {"loadgen", "names"},                                        # imports nothing of loadgen
    {"errors", "redact", "aio", "files", "console", "record"},   # the foundation
    {"config"},                                                  # RunConfig and its sub-configs
    {"engines"},                                                 # one adapter per engine: pure facts and parsing
    {"client"},                                                  # the transport
    {"target"},                                                  # what the server is, whether it is ready
    {"workload"},                                                # prompts, sized by the target's tokenizer
    {"schedule"},                                                # jobs and loops
    {"metrics"},                                                 # pure figures from records
    {"telemetry"},                                               # sources sampled during a cell's window
    {"results"},                                                 # the model: typed cells, the file, judgements
    {"verify"},                                                  # --verify: its prompts, reference and verifier
    {"sinks"},                                                   # each record as it ends, each finished cell
    {"report"},                                                  # its renderings: tables, compare, HTML, plots
    {"run"},                                                     # the runner, one cell, drivers, policies
    {"parallel"},                                                # worker processes, shards
    {"search"},                                                  # the SLO search: its walk, plan and answer
    {"sweep"},                                                   # reconfigure, prove ready, measure
    {"tune"},                                                    # the sweep's configurations, measured where open
    {"sim"},                                                     # the built-in simulator
    {"cli"},                                                     # flags → the run's parts
    {"__main__"},
]
LAYER_OF = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}
CORE = [p for p in PRODUCT if _rel(p).startswith("loadgen/")]


def _package(path: pathlib.Path, root: pathlib.Path = ROOT) -> str:
    parts = path.relative_to(root / "loadgen").with_suffix("").parts
    return "loadgen" if parts == ("__init__",) else parts[0]


def _imported_packages(path: pathlib.Path, root: pathlib.Path = ROOT) -> set[str]:
    """The loadgen packages a module imports (`loadgen.x.y` → x; `from loadgen import y` → y, or `loadgen`
    for a name of its __init__), its own left out."""
    out = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            mods = [node.module] if node.module != "loadgen" else \
                [f"loadgen.{a.name}" if (root / "loadgen" / a.name).exists()
                 or (root / "loadgen" / f"{a.name}.py").exists() else "loadgen" for a in node.names]
        else:
            continue
        out |= {m.split(".")[1] if "." in m else "loadgen" for m in mods if m.split(".")[0] == "loadgen"}
    return out - {_package(path, root)}


def test_every_package_has_a_layer():
    missing = sorted({_package(p) for p in CORE} - LAYER_OF.keys())
    assert missing == [], f"packages without a layer in LAYERS: {missing}"


def test_a_lower_layer_never_imports_a_higher_one():
    found = [f"{_rel(p)} ({_package(p)}, layer {LAYER_OF[_package(p)]}) imports {dep} (layer {LAYER_OF[dep]})"
             for p in CORE for dep in sorted(_imported_packages(p))
             if LAYER_OF.get(dep, -1) > LAYER_OF.get(_package(p), len(LAYERS))]
    assert found == [], "imports pointing up the layers:\n" + "\n".join(found)


def test_no_two_packages_import_each_other():
    edges = {(_package(p), dep) for p in CORE for dep in _imported_packages(p)}
    cycles = sorted(f"{a} ↔ {b}" for a, b in edges if (b, a) in edges and a < b)
    assert cycles == [], f"packages importing each other: {cycles}"


def test_the_run_imports_nothing_of_report():
    """The runner hands what it finished to the sinks; the console's lines and tables are one of them
    (report/console_sink.py), chosen in cli/assemble.py: the run knows no rendering."""
    found = [_rel(p) for p in CORE if _package(p) == "run" and "report" in _imported_packages(p)]
    assert found == [], f"run/ modules importing report/: {found}"


def test_the_layer_scan_sees_type_checking_imports(tmp_path):
    mod = tmp_path / "loadgen" / "metrics" / "m.py"
    mod.parent.mkdir(parents=True)
    mod.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from loadgen.run.cell import X\n"
                   "from loadgen import __version__\nimport loadgen.record\nfrom loadgen.metrics import stats\n")
    assert _imported_packages(mod, tmp_path) == {"run", "loadgen", "record"}


# ---- the cell's verdict, named values, one cell key -------------------------------------------------------
def _enum_values() -> set[str]:
    return {m.value for e in vars(names).values() if isinstance(e, type) and issubclass(e, StrEnum) for m in e}


def verdict_writes(path: pathlib.Path) -> list[str]:
    """`x["status"] = …`, `x["error"] = …` and `x.setdefault("status", …)`: a module that sets a verdict."""
    found = []
    for node in ast.walk(_tree(path)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
        for one in (e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])):
            if isinstance(one, ast.Subscript) and isinstance(one.slice, ast.Constant) and one.slice.value in VERDICT:
                found.append(f"{_rel(path)}:{node.lineno}: {ast.unparse(one)}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "setdefault"
                and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in VERDICT):
            found.append(f"{_rel(path)}:{node.lineno}: {ast.unparse(node)}")
    return found


VERDICT = ("status", "error")


def test_no_module_writes_a_cells_status_or_error():
    """Status and error are judged from incidents (results/incidents.judge) and written by the result's one
    serialisation (a dict built in results/cell_result.to_json), never set on a dict."""
    found = [hit for path in CORE for hit in verdict_writes(path)]
    assert found == [], "\n".join(found)


def literal_comparisons(path: pathlib.Path, values: set[str]) -> list[str]:
    """`==` / `!=` with a string literal that is the value of one of loadgen.names' enums."""
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Compare) and any(isinstance(o, ast.Eq | ast.NotEq) for o in node.ops) \
                and any(isinstance(c, ast.Constant) and c.value in values for c in [node.left, *node.comparators]):
            found.append(f"{_rel(path)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_enumerated_values_are_compared_by_name():
    found = [hit for path in CORE for hit in literal_comparisons(path, _enum_values())]
    assert len(found) <= 10, "compare with the enum member (loadgen/names.py):\n" + "\n".join(found)


def test_the_scans_catch_what_they_count(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('def f(cell, rec):\n    cell["status"] = "failed"\n    cell["error"], x = "e", 1\n'
                   '    cell.setdefault("error", "e")\n    return rec.outcome == "ok" or rec.api != "openai-chat"\n')
    assert len(verdict_writes(bad)) == 3
    assert len(literal_comparisons(bad, _enum_values())) == 2


def test_one_cell_key():
    defs = [_rel(p) for p in CORE for n in ast.walk(_tree(p)) if isinstance(n, ast.FunctionDef) and n.name == "cell_key"]
    assert defs == ["loadgen/record.py"]
