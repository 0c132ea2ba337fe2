"""Typed reads of a parsed TOML table, each bad value a UsageError that names where it is and what fits (a
scalar of the right type, a known key, a table, an argv list). Its own module because the sweep file's
structure (`spec`) and its tables' flags (`table_flags`) both read values this way, and neither is about the
other."""

from __future__ import annotations

from typing import overload

from loadgen.errors import UsageError


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_keys(t: dict, allowed: set, where: str) -> None:
    unknown = sorted(set(t) - allowed)
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(allowed))}")


def table(doc: dict, key: str, where: str, required: bool = False) -> dict:
    t = doc.get(key)
    if t is None:
        if required:
            raise UsageError(f"{where}: the [{key}] section is missing; see docs/sweep.md")
        return {}
    if not isinstance(t, dict):
        raise UsageError(f"{where}: {key} must be a table ([{key}] section)")
    return t


@overload
def string(t: dict, key: str, where: str, default: str) -> str: ...
@overload
def string(t: dict, key: str, where: str, default: None = None) -> str | None: ...
def string(t: dict, key: str, where: str, default: str | None = None) -> str | None:
    v = t.get(key, default)
    if v is not None and not isinstance(v, str):
        raise UsageError(f"{where}: {key} = {v!r} must be a string")
    return v


def argv_list(doc: dict, key: str, where: str, required: bool = False) -> list[str] | None:
    v = doc.get(key)
    if v is None:
        if required:
            raise UsageError(f"{where}: {key} is missing; give an argv list, e.g. "
                             f'{key} = ["ssh", "gpu-host", "bash /root/reconfig.sh {{budget}}"]')
        return None
    if isinstance(v, str):
        raise UsageError(f"{where}: {key} must be an argv list, not a shell string; split it, e.g. "
                         f"{key} = {v.split()!r}")
    if not isinstance(v, list) or not v or not all(isinstance(a, str) for a in v):
        raise UsageError(f"{where}: {key} must be a non-empty list of strings (an argv)")
    return v
