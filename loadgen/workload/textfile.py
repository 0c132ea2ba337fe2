"""Reading a user's file of prompts or rows: text only, and every unusable row named by file and line.

A file that is not text (a NUL byte, as in images and archives, or bytes that are not UTF-8) is refused as a
whole; a row that cannot be used is a `BadRow`, said on the console as `FILE:LINE: reason`. More bad rows than
`--max-bad-rows` stop the run before any load.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadgen.console import log
from loadgen.files import read_input

SNIFF_BYTES = 8192
TEXT_HINT = "give a JSONL or UTF-8 text file"
HINTS = {"--prompts": "give a JSONL or text file of prompts"}  # what to give instead, where a flag says more


class WorkloadError(Exception):
    """A workload file that cannot be used: one line saying what is wrong and how to fix it."""


@dataclass(frozen=True)
class BadRow:
    line: int
    reason: str


def read_text(path: str, flag: str) -> str:
    """The whole file as UTF-8 text; WorkloadError when it cannot be read (`files.input_error`), is binary or is
    not UTF-8."""
    data = read_input(path, HINTS.get(flag, TEXT_HINT), flag, WorkloadError)
    if b"\x00" in data[:SNIFF_BYTES]:
        raise WorkloadError(f"{flag} {path}: not a text file (it holds NUL bytes, as binary files do); "
                            f"{TEXT_HINT}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise WorkloadError(f"{flag} {path}: not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}); "
                            "convert it to UTF-8") from None


def check_bad_rows(flag: str, path: str, bad: list[BadRow], good: int, max_bad_rows: int,
                   quiet: bool = False, expected: str = "see docs/workloads.md for the formats") -> None:
    """Name every bad row on the console; raise WorkloadError when more than `max_bad_rows` are bad or no row
    is usable."""
    if not quiet:
        for b in bad:
            log(f"{path}:{b.line}: {b.reason}")
    if not good:
        named = f", {len(bad)} bad ones named above" if bad else ""
        raise WorkloadError(f"{flag} {path}: no usable rows{named} ({expected})")
    if len(bad) > max_bad_rows:
        raise WorkloadError(f"{flag} {path}: {len(bad)} unusable rows (named above), more than --max-bad-rows "
                            f"{max_bad_rows}; fix or remove them, or raise --max-bad-rows")
