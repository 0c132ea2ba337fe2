"""A sweep table's keys as run flags: [matrix] and [telemetry] (and [search], `search_table.SEARCH_FLAGS`) map
each key to the `loadgen` flag it becomes and the kind of value it takes; `table_flags` checks each value
against its kind and turns it into argv words. Its own module because it is the one table of what the sweep
file may say about a run, apart from how the file's configurations are read and rendered (`spec`)."""

from __future__ import annotations

import os

from loadgen.errors import UsageError
from loadgen.sweep.toml_values import check_keys, is_int, is_number

# key → (run flag, kind); each kind is checked and turned into argv words by `_FLAG_ARGS`
MATRIX_FLAGS = {
    "contexts": ("--contexts", "ints"), "concurrency": ("--concurrency", "ints"),
    "max_tokens": ("--max-tokens", "int"), "requests_per_cell": ("--requests-per-cell", "int"),
    "duration_per_cell_s": ("--duration-per-cell", "float"), "warmup": ("--warmup", "int"),
    "repeat": ("--repeat", "int"),
    "temperature": ("--temperature", "float"), "seed": ("--seed", "int"), "timeout_s": ("--timeout", "float"),
    "idle_timeout_s": ("--idle-timeout", "float"), "prompts": ("--prompts", "path"),
    "args": (None, "strs"),
}
TELEMETRY_FLAGS = {
    "server_metrics": ("--server-metrics", "str"), "accept_log_cmd": ("--accept-log-cmd", "str"),
    "dcgm": ("--dcgm", "strs"), "nvml": ("--nvml", "bool"), "interval_s": ("--telemetry-interval", "float"),
}


def table_flags(t: dict, spec: dict, where: str, base: str) -> list[str]:
    """The run flags for table `t`, each key checked against its kind in `spec` (key → (flag, kind))."""
    check_keys(t, set(spec), where)
    out: list[str] = []
    for key, value in t.items():
        flag, kind = spec[key]
        args = _FLAG_ARGS[kind](flag, value, base)
        if args is None:
            raise UsageError(f"{where}: {key} = {value!r} must be {_KIND_TEXT[kind]}")
        out += args
    return out


def _ints_args(flag, v, base):
    return [flag, ",".join(map(str, v))] if isinstance(v, list) and v and all(map(is_int, v)) else None


def _strs_args(flag, v, base):
    v = [v] if isinstance(v, str) and flag else v
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        return None
    return v if flag is None else [flag, ",".join(v)]


# kind → (flag, TOML value, sweep file's folder) → the argv words, or None when the value has the wrong type.
# A flag of None (matrix `args`) passes the strings through as they are.
_FLAG_ARGS = {
    "ints": _ints_args,
    "int": lambda flag, v, base: [flag, str(v)] if is_int(v) else None,
    "float": lambda flag, v, base: [flag, repr(float(v))] if is_number(v) else None,
    "bool": lambda flag, v, base: ([flag] if v else []) if isinstance(v, bool) else None,
    "strs": _strs_args,
    "str": lambda flag, v, base: [flag, v] if isinstance(v, str) else None,
    "path": lambda flag, v, base: [flag, os.path.join(base, v)] if isinstance(v, str) else None,
}
_KIND_TEXT = {"ints": "a non-empty list of whole numbers, e.g. [1, 32, 64]", "int": "a whole number",
              "float": "a number", "bool": "true or false", "strs": "a list of strings",
              "str": "a string", "path": "a file path (relative to the sweep file)"}
