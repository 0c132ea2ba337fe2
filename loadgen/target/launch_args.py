"""A local server's own launch settings, read from its process when the target is on this machine.

llama-server does not serve its speculative settings over HTTP: `/props` and `/slots` say whether a slot
speculates, but not which draft model, how many draft tokens (`--spec-draft-n-max` / `-n-min`) or which
speculative type. Two servers with different drafts would look identical. When the target's host is a loopback
address, the process listening on its port is found through `/proc` (Linux) and its command line (and the
`LLAMA_ARG_*` variables llama.cpp also reads) is parsed for those settings only: nothing else of the command
line or the environment is kept, so an `--api-key` on it is never stored.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from urllib.parse import urlsplit

# setting -> (flags, environment variables), every spelling the llama.cpp versions have used
LLAMACPP_FLAGS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "speculative_draft_model_path": (("-md", "--model-draft", "--spec-draft-model"),
                                     ("LLAMA_ARG_SPEC_DRAFT_MODEL", "LLAMA_ARG_MODEL_DRAFT")),
    "speculative_draft_n_max": (("--spec-draft-n-max", "--draft", "--draft-n", "--draft-max"),
                                ("LLAMA_ARG_SPEC_DRAFT_N_MAX", "LLAMA_ARG_DRAFT_MAX")),
    "speculative_draft_n_min": (("--spec-draft-n-min", "--draft-min", "--draft-n-min"),
                                ("LLAMA_ARG_SPEC_DRAFT_N_MIN", "LLAMA_ARG_DRAFT_MIN")),
    "speculative_draft_p_min": (("--spec-draft-p-min", "--draft-p-min"),
                                ("LLAMA_ARG_SPEC_DRAFT_P_MIN", "LLAMA_ARG_DRAFT_P_MIN")),
    "speculative_type": (("--spec-type",), ("LLAMA_ARG_SPEC_TYPE",)),
    "speculative_draft_context": (("-cd", "--ctx-size-draft"),
                                  ("LLAMA_ARG_CTX_SIZE_DRAFT",)),
    "parallel_slots": (("-np", "--parallel"), ("LLAMA_ARG_N_PARALLEL",)),
    "context_size_total": (("-c", "--ctx-size"), ("LLAMA_ARG_CTX_SIZE",)),
    "model_path": (("-m", "--model"), ("LLAMA_ARG_MODEL",)),
}
NUMERIC = {"speculative_draft_n_max", "speculative_draft_n_min", "speculative_draft_p_min",
           "speculative_draft_context", "parallel_slots", "context_size_total"}
TCP_LISTEN = "0A"


def _number(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def flag_values(argv: list[str]) -> dict[str, str]:
    """The last value of each `--flag VALUE` / `--flag=VALUE` on a command line (later flags win, as in llama.cpp)."""
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


def llamacpp_settings(argv: list[str], env: dict[str, str]) -> dict:
    """The settings of LLAMACPP_FLAGS found on `argv` (a flag wins over its environment variable)."""
    flags = flag_values(argv)
    out: dict = {}
    for key, (names, env_names) in LLAMACPP_FLAGS.items():
        found = [flags[n] for n in names if n in flags] or [env[n] for n in env_names if env.get(n)]
        if found:
            out[key] = _number(found[-1]) if key in NUMERIC else found[-1]
    return out


def loopback_port(url: str) -> int | None:
    """The port of `url` when its host is a loopback address (or localhost); None for any other host."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        local = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = False
    if not local:
        return None
    return parts.port or (443 if parts.scheme == "https" else 80)


def listening_inodes(port: int, proc: Path = Path("/proc")) -> set[str]:
    """Socket inodes of TCP sockets listening on `port` (from /proc/net/tcp and tcp6)."""
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[3] == TCP_LISTEN and int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(cols[9])
    return inodes


def listening_pid(port: int, proc: Path = Path("/proc")) -> int | None:
    """The pid of a process holding a socket that listens on `port`; None when none can be seen."""
    wanted = {f"socket:[{inode}]" for inode in listening_inodes(port, proc)}
    if not wanted:
        return None
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fds = list((entry / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd) in wanted:
                    return int(entry.name)
            except OSError:
                continue
    return None


def process_launch(pid: int, proc: Path = Path("/proc")) -> tuple[list[str], dict[str, str]] | None:
    """(argv, the LLAMA_ARG_* environment) of process `pid`; None when it cannot be read."""
    try:
        argv = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    env: dict[str, str] = {}
    try:
        for item in (proc / str(pid) / "environ").read_bytes().split(b"\0"):
            name, _, value = item.decode("utf-8", "replace").partition("=")
            if name.startswith("LLAMA_ARG_"):
                env[name] = value
    except OSError:
        pass
    return [a.decode("utf-8", "replace") for a in argv if a], env


def local_llamacpp_settings(url: str) -> tuple[dict | None, str | None]:
    """(llamacpp_settings of the process serving `url` on this machine, None) or (None, why they are unknown)."""
    port = loopback_port(url)
    if port is None:
        return None, "llama-server does not serve them over HTTP, and it is not on a loopback address of this machine"
    pid = listening_pid(port)
    launch = process_launch(pid) if pid else None
    if launch is None:
        return None, (f"llama-server does not serve them over HTTP, and no process that loadgen may read listens "
                      f"on port {port} here")
    settings, name = llamacpp_settings(*launch), Path(launch[0][0]).name if launch[0] else "?"
    if not settings and "llama" not in name:  # a local proxy in front of the server, not the server itself
        return None, (f"llama-server does not serve them over HTTP, and what listens on port {port} here is not "
                      f"llama-server ({name})")
    return settings, None
