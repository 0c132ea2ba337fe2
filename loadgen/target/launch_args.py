"""A local server's own launch settings, read from its process when the target is on this machine.

Some engines do not serve their speculative settings over HTTP (llama-server's `/props` and `/slots` say
whether a slot speculates, not which draft model or how many draft tokens), so two servers with different
drafts would look identical. When the target's host is a loopback address, the process listening on its port
is found through `/proc` (Linux) and its command line (and the environment variables the engine also reads)
is parsed for the settings its adapter names (`EngineAdapter.launch`) only: nothing else of the command line
or the environment is kept, so an `--api-key` on it is never stored.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from loadgen.engines.base import LaunchFlags
from loadgen.engines.launch import flag_values, launch_settings
from loadgen.engines.llamacpp import LAUNCH as LLAMACPP_LAUNCH

__all__ = ["flag_values", "llamacpp_settings", "local_llamacpp_settings", "local_settings", "loopback_port"]
TCP_LISTEN = "0A"


def llamacpp_settings(argv: list[str], env: dict[str, str]) -> dict:
    """llama-server's launch settings found on `argv` (a flag wins over its environment variable)."""
    return launch_settings(LLAMACPP_LAUNCH, argv, env)


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


def process_launch(pid: int, env_prefix: str,
                   proc: Path = Path("/proc")) -> tuple[list[str], dict[str, str]] | None:
    """(argv, the environment variables named `env_prefix`…) of process `pid`; None when it cannot be read."""
    try:
        argv = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    env: dict[str, str] = {}
    try:
        for item in (proc / str(pid) / "environ").read_bytes().split(b"\0"):
            name, _, value = item.decode("utf-8", "replace").partition("=")
            if name.startswith(env_prefix):
                env[name] = value
    except OSError:
        pass
    return [a.decode("utf-8", "replace") for a in argv if a], env


def local_settings(url: str, launch: LaunchFlags) -> tuple[dict[str, Any] | None, str | None]:
    """(the `launch` settings of the process serving `url` on this machine, None) or (None, why they are
    unknown)."""
    server = launch.server_name
    port = loopback_port(url)
    if port is None:
        return None, f"{server} does not serve them over HTTP, and it is not on a loopback address of this machine"
    pid = listening_pid(port)
    found = process_launch(pid, launch.env_prefix) if pid else None
    if found is None:
        return None, (f"{server} does not serve them over HTTP, and no process that loadgen may read listens "
                      f"on port {port} here")
    settings, name = launch_settings(launch, *found), Path(found[0][0]).name if found[0] else "?"
    if not settings and launch.program_mark not in name:  # a local proxy in front of the server, not the server
        return None, (f"{server} does not serve them over HTTP, and what listens on port {port} here is not "
                      f"{server} ({name})")
    return settings, None


def local_llamacpp_settings(url: str) -> tuple[dict | None, str | None]:
    """local_settings of a llama-server."""
    return local_settings(url, LLAMACPP_LAUNCH)
