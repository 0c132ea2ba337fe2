"""`python -m loadgen …` processes for the tests, forked from a process that has already imported loadgen.

A test that runs the CLI or starts the simulator paid ~0.5-1 s of imports for each process (numpy, aiohttp, the
run's modules), most of the CPU of a short sim test. `spawn(argv, …)` asks one server process (`serve`, started
once a session) that imported them to fork: the child sets the cwd, the environment, stdin/stdout/stderr (the
caller's descriptors, passed over a Unix socket) and `sys.argv`, then runs `loadgen`'s `__main__` as
`python -m loadgen` does. It is a process of its own, with its own pid, sockets and signals; `Forked` is the
caller's handle, with the parts of `subprocess.Popen` the tests use (`pid`, `poll`, `wait`, `communicate`,
`send_signal`, `terminate`, `kill`, `returncode`, `stdout`, `stderr`). The server reaps its children and sends
each one's exit status (as `Popen.returncode` gives it) to its caller.

Where it cannot be used (no `os.pidfd_open`, `LOADGEN_TEST_FORK=0`) `spawn` is `subprocess.Popen` itself.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRELOAD = ("loadgen.cli.main", "loadgen.cli.run_options", "loadgen.cli.run_config", "loadgen.cli.assemble",
           "loadgen.cli.resume", "loadgen.console", "loadgen.sim.process", "loadgen.cli.sim_options",
           "loadgen.sim.main", "loadgen.sim.server", "loadgen.run.runner", "loadgen.report.table", "numpy",
           "aiohttp", "aiohttp.web", "uvloop", "orjson")
_LOCK = threading.Lock()
_SERVER: dict = {}


# ---- the server: imports once, forks a child a request ------------------------------------------------------
def serve(path: str) -> None:
    """Import `PRELOAD`, listen on the Unix socket `path`, fork a child for each request, and send each caller
    its child's pid, then its exit status."""
    import importlib

    sys.path[0] = str(ROOT)  # `python -c` put the cwd here; a child's chdir must not move it
    for name in PRELOAD:
        with contextlib.suppress(ImportError):  # a module moved: the child imports what it needs
            importlib.import_module(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, None)
    sel.register(sys.stdin, selectors.EVENT_READ, "caller")  # its end of the pipe closes when the session ends
    print("ready", flush=True)
    while True:
        for key, _ in sel.select():
            if key.data == "caller":
                if not os.read(0, 1):
                    return
            elif key.data is None:
                try:
                    _fork_one(listener, sel)
                except (OSError, EOFError, ValueError) as exc:  # a caller that went away: serve the next ones
                    print(f"fork server: a request failed: {exc!r}", file=sys.stderr, flush=True)
            else:
                pid, conn = key.data
                sel.unregister(key.fd)
                os.close(key.fd)
                _, status = os.waitpid(pid, 0)
                with contextlib.suppress(OSError):
                    conn.sendall(b"%d\n" % os.waitstatus_to_exitcode(status))
                conn.close()


def _fork_one(listener: socket.socket, sel: selectors.BaseSelector) -> None:
    conn, _ = listener.accept()
    conn.settimeout(30)  # a caller that connected sends its request at once
    size = int.from_bytes(_recv_exact(conn, 4), "big")
    msg, fds, _, _ = socket.recv_fds(conn, size, 3)
    if not msg:
        raise EOFError("the caller went away")
    msg += _recv_exact(conn, size - len(msg))
    request = json.loads(msg)
    conn.settimeout(None)
    pid = os.fork()
    if pid == 0:
        listener.detach()
        conn.detach()
        _child(request, fds)  # never returns
    for fd in fds:
        os.close(fd)
    conn.sendall(b"%d\n" % pid)
    sel.register(os.pidfd_open(pid), selectors.EVENT_READ, (pid, conn))


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        part = conn.recv(n - len(data))
        if not part:
            raise EOFError("the caller went away")
        data += part
    return data


def _child(request: dict, fds: list[int]) -> None:
    """In the forked child: become `python -m loadgen ARGV` in the caller's cwd and environment, with its stdio."""
    import atexit
    import runpy

    code = 1
    try:
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
        os.closerange(3, 1 << 16)  # the server's sockets, the other callers' descriptors
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.stdin = open(0, encoding="utf-8", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)
        sys.argv = ["-m", *request["argv"]]
        try:
            runpy.run_module("loadgen", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc.code)
        except KeyboardInterrupt:  # as Python ends on one: killed by SIGINT
            _flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        except BaseException:  # noqa: BLE001 (what `python -m` prints for an uncaught exception)
            import traceback
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()
        _flush()
    finally:
        os._exit(code)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def _exit_code(value) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    print(value, file=sys.stderr)
    return 1


# ---- the caller's side -------------------------------------------------------------------------------------
def enabled() -> bool:
    return hasattr(os, "pidfd_open") and os.environ.get("LOADGEN_TEST_FORK", "1") != "0"


def _server_path() -> str:
    """The running server's socket, started on first use (it ends when this process closes its stdin)."""
    with _LOCK:
        if "path" not in _SERVER:
            folder = tempfile.mkdtemp(prefix="loadgen-fork-")
            path = os.path.join(folder, "fork.sock")
            env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
            proc = subprocess.Popen([sys.executable, "-c", f"from tests.forked import serve; serve({path!r})"],
                                    cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            line = proc.stdout.readline()
            if line.strip() != b"ready":
                proc.kill()
                raise RuntimeError(f"the fork server did not start: {line!r}")
            _SERVER.update(path=path, proc=proc)
        return _SERVER["path"]


def shutdown() -> None:
    """Stop the server (its children that still run are left to their callers)."""
    with _LOCK:
        proc = _SERVER.pop("proc", None)
        path = _SERVER.pop("path", None)
    if path is not None:
        import shutil
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    if proc is not None:
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Forked:
    """A forked `python -m loadgen` process, handled as a `subprocess.Popen`."""

    def __init__(self, argv: list[str], *, cwd, env: dict, stdin, stdout, stderr, text: bool):
        self.args = [sys.executable, "-m", "loadgen", *argv]
        self.returncode: int | None = None
        ends, mine = [], []  # the child's descriptors; ours (pipe read ends)
        for spec, write in ((stdin, False), (stdout, True), (stderr, True)):
            if spec == subprocess.PIPE:
                r, w = os.pipe()
                ends.append(w if write else r)
                mine.append(os.fdopen(r, "rb") if write else os.fdopen(w, "wb"))
            elif spec == subprocess.STDOUT:
                ends.append(ends[1])
                mine.append(None)
            elif spec is None or spec == subprocess.DEVNULL:
                ends.append(os.open(os.devnull, os.O_RDWR))
                mine.append(None)
            else:
                fd = spec if isinstance(spec, int) else spec.fileno()
                ends.append(os.dup(fd))
                mine.append(None)
        if text:
            mine = [io.TextIOWrapper(f, encoding="utf-8", errors="replace") if f is not None else None
                    for f in mine]
        self.stdin, self.stdout, self.stderr = mine
        payload = json.dumps({"argv": argv, "cwd": str(cwd), "env": env}).encode()
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._conn.connect(_server_path())
            self._conn.sendall(len(payload).to_bytes(4, "big"))
            socket.send_fds(self._conn, [payload], ends)
        finally:
            for fd in set(ends):
                os.close(fd)
        self._reader = self._conn.makefile("rb")
        self.pid = int(self._reader.readline())

    def poll(self) -> int | None:
        if self.returncode is None:
            ready, _, _ = __import__("select").select([self._conn], [], [], 0)
            if ready:
                self._read_status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            ready, _, _ = __import__("select").select([self._conn], [], [], timeout)
            if not ready:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._read_status()
        return self.returncode

    def _read_status(self) -> None:
        line = self._reader.readline()
        if not line:
            raise RuntimeError("the fork server went away before the child's exit status")
        self.returncode = int(line)
        self._reader.close()
        self._conn.close()

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, input=None, timeout: float | None = None):
        """Both outputs read to their end (each in a thread), then the exit status, as `Popen.communicate`."""
        if self.stdin is not None:
            if input:
                self.stdin.write(input)
            self.stdin.close()
        results: dict = {}

        def read(name: str, stream) -> None:
            results[name] = stream.read()

        threads = [threading.Thread(target=read, args=(name, s), daemon=True)
                   for name, s in (("stdout", self.stdout), ("stderr", self.stderr)) if s is not None]
        for t in threads:
            t.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in threads:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return results.get("stdout"), results.get("stderr")

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        for s in (self.stdout, self.stderr, self.stdin):
            if s is not None:
                s.close()
        self.wait()


def spawn(argv: list[str], *, cwd=ROOT, env: dict | None = None, stdin=None, stdout=None, stderr=None,
          text: bool = False, fresh: bool = False):
    """`python -m loadgen ARGV`: forked when `enabled()`, else (or `fresh`) `subprocess.Popen`."""
    env = dict(os.environ if env is None else env)
    if fresh or not enabled():
        return subprocess.Popen([sys.executable, "-m", "loadgen", *argv], cwd=cwd, env=env, stdin=stdin,
                                stdout=stdout, stderr=stderr, text=text)
    return Forked(argv, cwd=cwd, env=env, stdin=stdin, stdout=stdout, stderr=stderr, text=text)


def run(argv: list[str], *, timeout: float, cwd=ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    """`subprocess.run([python, -m, loadgen, *argv], capture_output=True, text=True, timeout=…)`, forked."""
    proc = spawn(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
