"""Durable writes: results replaced atomically, records appended and flushed as each request ends."""

from __future__ import annotations

import os
import tempfile

import orjson


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
