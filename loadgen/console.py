"""Messages to the user: one line each on stderr, flushed at once (stdout carries only the final tables).

Every line loadgen prints fits WIDTH columns: `wrap` breaks a longer one at spaces, its continuation indented
under the line's own indent by INDENT, never cut; `log` wraps what it says."""

from __future__ import annotations

import sys
import textwrap

WIDTH = 120
INDENT = "    "


def wrap_lines(line: str, width: int = WIDTH, indent: str = INDENT) -> list[str]:
    """One line as lines within `width`: broken at spaces (not at hyphens, so a flag stays whole), each
    continuation starting with the line's own leading spaces plus `indent`; only a word wider than a whole line
    is broken inside."""
    if len(line) <= width:
        return [line]
    lead = line[: len(line) - len(line.lstrip(" "))]
    return textwrap.wrap(line, width, subsequent_indent=lead + indent,
                         break_on_hyphens=False) or [line]


def wrap(text: str, width: int = WIDTH, indent: str = INDENT) -> str:
    """Every line of `text` wrapped by `wrap_lines`; lines within `width` are left as they are."""
    return "\n".join(w for line in text.split("\n") for w in wrap_lines(line, width, indent))


def log(msg: str) -> None:
    print(wrap(msg), file=sys.stderr, flush=True)


def table_width(limit: int = WIDTH) -> int:
    """The width the final tables fit: `limit`, or the terminal's when stdout is a narrower terminal."""
    import shutil

    if not sys.stdout.isatty():
        return limit
    return min(limit, shutil.get_terminal_size((limit, 24)).columns)
