"""Messages to the user: one line each on stderr, flushed at once (stdout carries only the final tables)."""

from __future__ import annotations

import sys


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def table_width(limit: int = 120) -> int:
    """The width the final tables fit: `limit`, or the terminal's when stdout is a narrower terminal."""
    import shutil

    if not sys.stdout.isatty():
        return limit
    return min(limit, shutil.get_terminal_size((limit, 24)).columns)
