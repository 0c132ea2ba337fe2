"""Files at the edge: inputs a flag names read with one-line errors; durable writes (results replaced atomically,
records appended and flushed as each request ends)."""

from __future__ import annotations

import errno
import os
import stat
import tempfile

import orjson

from loadgen.errors import UsageError

_WHY = {errno.ENOENT: "no such file", errno.ENOTDIR: "no such file", errno.EISDIR: "is a folder, not a file",
        errno.EACCES: "permission denied", errno.EPERM: "permission denied"}


def input_error(path: str, exc: OSError, hint: str, flag: str | None = None,
                error: type[Exception] = UsageError) -> Exception:
    """The one line for an input file that cannot be read: `FLAG PATH: why; hint` (`error`, a UsageError unless
    the caller turns its own errors into one)."""
    why = _WHY.get(exc.errno or 0, (exc.strerror or str(exc)).lower())  # e.g. "input/output error"
    return error(f"{flag + ' ' if flag else ''}{path}: {why}; {hint}")


def read_input(path: str, hint: str, flag: str | None = None, error: type[Exception] = UsageError) -> bytes:
    """The bytes of a file the user named; missing, a folder, not readable by this user or failing to read (an
    I/O error, as /proc/self/mem gives) is `input_error`, never a traceback."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise input_error(path, exc, hint, flag, error) from None


def check_input(path: str, hint: str, flag: str | None = None) -> None:
    """`read_input`'s error now, for a file read later (after the simulator has started, or by another library):
    a regular file gives its first byte; a pipe or device is only checked for permission, so that nothing is
    taken from it before its reader comes."""
    try:
        if stat.S_ISREG(os.stat(path).st_mode):
            with open(path, "rb") as fh:
                fh.read(1)
        elif os.path.isdir(path):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        elif not os.access(path, os.R_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
    except OSError as exc:
        raise input_error(path, exc, hint, flag) from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str, data: bytes) -> None:
    """Write to a temp file in the same directory, fsync, then rename over `path` (readers never see a half
    file; a crash leaves the previous version). Permissions follow the umask like a plain open() would."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json_atomic(path: str, obj) -> None:
    write_atomic(path, orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY) + b"\n")


def read_json(path: str):
    with open(path, "rb") as fh:
        return orjson.loads(fh.read())


def read_jsonl(path: str) -> list[dict]:
    """Rows of a JSONL file; a torn last line (the process was killed mid-write) is skipped."""
    rows = []
    with open(path, "rb") as fh:
        for line in fh:
            try:
                rows.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                continue
    return rows
