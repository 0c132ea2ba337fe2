"""Reading an engine's settings off its command line and environment (pure; the process is found in target/)."""

from __future__ import annotations

from typing import Any

from loadgen.engines.base import LaunchFlags


def _number(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def flag_values(argv: list[str]) -> dict[str, str]:
    """The last value of each `--flag VALUE` / `--flag=VALUE` on a command line (later flags win)."""
    out: dict[str, str] = {}
    for i, arg in enumerate(argv):
        if not arg.startswith("-"):
            continue
        name, eq, value = arg.partition("=")
        if eq:
            out[name] = value
        elif i + 1 < len(argv):
            out[name] = argv[i + 1]
    return out


def launch_settings(launch: LaunchFlags, argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """The settings of `launch` found on `argv` (a flag wins over its environment variable)."""
    flags = flag_values(argv)
    out: dict[str, Any] = {}
    for key, (names, env_names) in launch.settings.items():
        found = [flags[n] for n in names if n in flags] or [env[n] for n in env_names if env.get(n)]
        if found:
            out[key] = _number(found[-1]) if key in launch.numeric else found[-1]
    return out
