"""The architecture's rules, checked on the source (ast), so a change that breaks one fails here.

- Composition, not patching: no module assigns a function, lambda or bound method to an attribute of an
  object (`runner.run = self.run`) and nothing calls `setattr` with behaviour. Data attributes are fine.
- The core (`loadgen/` outside `loadgen/cli/`) never imports `exporters/`; the CLI wires exporters in, and
  nothing outside the CLI imports it.
- Sizes: a product module ≤ 300 lines, a function ≤ 40 lines, unless the module docstring names it under
  "Size exception:" with the reason.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

pytestmark = pytest.mark.unit

ROOT = pathlib.Path(__file__).resolve().parent.parent
PRODUCT = sorted([*ROOT.glob("loadgen/**/*.py"), *ROOT.glob("exporters/**/*.py")])
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 40


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
