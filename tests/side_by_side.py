"""Module fixtures that mostly wait, built side by side.

A Prometheus scraping a 100 s run, or a search against a reference server, spends its wall time sleeping on
cells: built one after the other at their turn they cost their sum; built in threads at once they cost about the
longest of them. A test module registers its build at import (`@background("name", when=...)`); `select(items)`
(tests/conftest.py, once the collection is final) notes each build of a module that has a selected test; the
first module fixture that asks for a value with `result("name")` starts them all, each in a thread, and waits for
them all (re-raising what its own build raised); the others are ready when their modules come. A fixture
gives the processes back with `finish("name")`; a build left unfinished (its module not reached: `-x`, an
interrupt) is finished at the end of the session. They start only then, not with the session: what runs beside
them is each other, never a test that times something against the machine. Without a selected test of its
module nothing is started: `pytest -m unit` or one file costs nothing more.
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
    """Note every build whose module has a test among `items` (the selected tests), to start together with the
    first one asked for, each in a folder made by `mktemp` (pytest's, kept with the session's other temporary
    folders); returns their names."""
    if mktemp is not None:
        _MKTEMP[:] = [mktemp]
    modules = {item.module.__name__.rsplit(".", 1)[-1] for item in items if getattr(item, "module", None)}
    _SELECTED[:] = [name for name, e in _ENTRIES.items() if e.when and e.module in modules]
    return list(_SELECTED)


def result(name: str) -> Any:
    """The value of the build of `name`; the first call starts every selected build beside it and waits for them
    all, so that no build is still running when the next test module starts."""
    for other in (*_SELECTED, name):
        start(other)
    concurrent.futures.wait([e.future for e in _ENTRIES.values() if e.future is not None])
    return _ENTRIES[name].future.result()


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
