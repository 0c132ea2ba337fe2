"""Module fixtures that mostly wait, built side by side.

A Prometheus scraping a 60 s run, or a search against a reference server, spends its wall time sleeping on
cells: built one after the other at their turn they cost their sum; built in threads at once they cost about the
longest of them. A test module registers its build at import (`@background("name", when=...)`); `select(items)`
(tests/conftest.py, once the collection is final) notes each build of a module that has a selected test of
another tier than `unit`, and `start_selected()` starts them, each in a thread, with the session.
tests/conftest.py runs the unit tier first, beside them (in-process and pure: nothing it checks is timed against
the machine), then the modules that read them, then the rest; the first test of another tier waits until every
build has ended (`wait_all`). What runs beside a build is the unit tier and the other builds, never a test that
times something against the machine. A module fixture takes its value with `result("name")` (which re-raises
what its build raised) and gives the processes back with `finish("name")`; a build left unfinished (its module
not reached: `-x`, an interrupt) is finished at the end of the session. Without a selected test of another tier
in its module nothing is started: `pytest -m unit` or another file costs nothing more.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Build = Callable[[Path, contextlib.ExitStack], Any]  # (its own temporary folder, its cleanups) -> its value


@dataclass
class _Entry:
    module: str
    build: Build
    when: bool
    cleanups: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    future: concurrent.futures.Future | None = None


_ENTRIES: dict[str, _Entry] = {}
_POOL: concurrent.futures.ThreadPoolExecutor | None = None
_SELECTED: list[str] = []  # the builds of the selected tests' modules, in registration order


def background(name: str, when: bool = True) -> Callable[[Build], Build]:
    """Register `build` under `name` for its module; `when` False (a binary absent: its tests skip) starts none."""
    def register(build: Build) -> Build:
        # a module imported twice (by pytest as `test_x`, by another test as `tests.test_x`) registers once
        _ENTRIES.setdefault(name, _Entry(build.__module__.rsplit(".", 1)[-1], build, when))
        return build
    return register


_MKTEMP: list[Callable[[str], Path]] = []  # pytest's tmp_path_factory.mktemp, once the session gives it


def _run(name: str, entry: _Entry) -> Any:
    tmp = _MKTEMP[0](name) if _MKTEMP else Path(tempfile.mkdtemp(prefix=f"loadgen-{name}-"))
    return entry.build(tmp, entry.cleanups)


def start(name: str) -> None:
    """Start the build of `name` in a thread, unless it has started already."""
    global _POOL
    entry = _ENTRIES[name]
    if entry.future is None:
        _POOL = _POOL or concurrent.futures.ThreadPoolExecutor(max(1, len(_ENTRIES)),
                                                               thread_name_prefix="side-by-side")
        entry.future = _POOL.submit(_run, name, entry)


def select(items: Iterable, mktemp: Callable[[str], Path] | None = None) -> list[str]:
    """Note every build whose module has a test of another tier than `unit` among `items` (the selected tests; a
    unit test reads no build), to start together, each in a folder made by `mktemp` (pytest's, kept with the
    session's other temporary folders); returns their names."""
    if mktemp is not None:
        _MKTEMP[:] = [mktemp]
    modules = {item.module.__name__.rsplit(".", 1)[-1] for item in items
               if getattr(item, "module", None) and item.get_closest_marker("unit") is None}
    _SELECTED[:] = [name for name, e in _ENTRIES.items() if e.when and e.module in modules]
    return list(_SELECTED)


def result(name: str) -> Any:
    """The value of the build of `name`, once every build has ended (any not yet started, `name` and the
    selected ones, is started first: a session whose collection did not start them)."""
    for other in (*_SELECTED, name):
        start(other)
    wait_all()
    return _ENTRIES[name].future.result()


def modules() -> set[str]:
    """The test modules that registered a build."""
    return {e.module for e in _ENTRIES.values()}


def start_selected() -> list[str]:
    """Start every selected build now, each in a thread: tests/conftest.py runs the unit tier beside them, and
    `wait_all` before the first test of another tier. Returns their names."""
    for name in _SELECTED:
        start(name)
    return list(_SELECTED)


def wait_all() -> None:
    """Until every started build has ended (what one raised is raised by `result`, to its own module)."""
    concurrent.futures.wait([e.future for e in _ENTRIES.values() if e.future is not None])


def finish(name: str, timeout_s: float = 60.0) -> None:
    """Close the cleanups of `name` (stop its processes), then wait for its build: one still running (the session
    interrupted) fails at once, its processes gone. A no-op if never started."""
    entry = _ENTRIES[name]
    entry.cleanups.close()
    if entry.future is not None:
        concurrent.futures.wait([entry.future], timeout=timeout_s)


def finish_all() -> None:
    for name in _ENTRIES:
        finish(name)
    if _POOL is not None:
        _POOL.shutdown(wait=True)
