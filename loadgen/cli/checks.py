"""Checks of single command-line values: a bad value raises UsageError saying what is wrong and how to fix
it."""

from __future__ import annotations

import math
import os
import tempfile
import time
from datetime import datetime
from urllib.parse import urlparse

from loadgen.client.api import APIS
from loadgen.errors import UsageError
from loadgen.names import Api

INTS_HINT = "give comma-separated integers like 1,32,64"
# every file a run's flag names: (flag, its argparse name, what to give instead when it cannot be read)
INPUT_FILES = (
    ("--prompts", "prompts", "give a JSONL or text file of prompts"),
    ("--dataset", "dataset", "give a JSONL or UTF-8 text file"),
    ("--trace", "trace", "give a JSONL or UTF-8 text file"),
    ("--api-key-file", "api_key_file", "give a file that holds the key"),
    ("--ca-cert", "ca_cert", "give the PEM file of the server's CA"),
    ("--verify-prompts", "verify_prompts", "give a text or JSONL file of prompts"),
    ("--verify-reference", "verify_reference", "give a file written by --verify-save-reference"),
)


def check_input_files(a) -> None:
    """Every input file the flags name can be read, before anything starts (some are read only once the
    simulator is up or by another library): else the one line of `files.input_error`, exit 2."""
    from loadgen.files import check_input  # not at import: --help reaches this module, and files needs orjson

    for flag, name, hint in INPUT_FILES:
        path = getattr(a, name, None)
        if path:
            check_input(path, hint, flag)


def parse_int_list(flag: str, text: str, minimum: int = 1, hint: str = INTS_HINT) -> list[int]:
    """'1,32,64' → [1, 32, 64]; empty items, non-integers and values below `minimum` are errors (`hint` says
    what to give instead)."""
    items = text.split(",")
    out = []
    for item in items:
        item = item.strip()
        if not item:
            raise UsageError(f"{flag}: empty item in {text!r}; {hint}")
        try:
            value = int(item)
        except ValueError:
            raise UsageError(f"{flag}: {item!r} is not an integer; {hint}") \
                from None
        if value < minimum:
            raise UsageError(f"{flag}: {value} is below {minimum}; every value must be ≥ {minimum}")
        if value in out:
            raise UsageError(f"{flag}: {value} appears twice in {text!r}; give each value once")
        out.append(value)
    return out


def int_list_text(values: list[int]) -> str:
    """`parse_int_list`'s input for `values` (a default, as --help shows it)."""
    return ",".join(map(str, values))


def parse_float_list(flag: str, text: str) -> list[float]:
    out = []
    for item in text.split(","):
        item = item.strip()
        try:
            value = float(item)
        except ValueError:
            raise UsageError(f"{flag}: {item!r} is not a number; give comma-separated numbers like 5,10,20") \
                from None
        if not (value > 0 and math.isfinite(value)):
            raise UsageError(f"{flag}: {item} must be a finite number > 0, e.g. 5,10,20")
        out.append(value)
    return out


def positive(flag: str, value: float | int | None, allow_zero: bool = False):
    if value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        raise UsageError(f"{flag}: {value} is not a finite number; give a number {'≥ 0' if allow_zero else '> 0'}")
    if value < 0 or (value == 0 and not allow_zero):
        raise UsageError(f"{flag}: {value} must be {'≥ 0' if allow_zero else '> 0'}")
    return value


def check_url(url: str) -> str:
    parsed = urlparse(url)
    if "@" in parsed.netloc:  # never echo it: it may hold a password
        raise UsageError("--url must not carry credentials (user:password@host); put the API key in the "
                         "environment variable named by --api-key-env (default OPENAI_API_KEY) or in --api-key-file")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise UsageError(f"--url {url!r} needs a scheme and host, e.g. http://gpu-host:30000")
    try:
        port = parsed.port
    except ValueError:
        port = 0
    if port == 0:
        raise UsageError(f"--url {url!r}: the port must be a number from 1 to 65535, e.g. http://gpu-host:30000")
    if parsed.path.rstrip("/").endswith("/v1"):
        root = url.rstrip("/")[: -len("/v1")]
        raise UsageError(f"--url {url!r} ends in /v1; give the server's root ({root}), loadgen adds the API path")
    return url.rstrip("/")


def check_api(api: str) -> Api:
    if api not in APIS:
        raise UsageError(f"--api {api!r} is unknown; choose one of {', '.join(APIS)}")
    return Api(api)


def check_out_path(path: str, flag: str = "--out") -> str:
    """The results path, its missing folders created, checked by creating (and removing) a file beside it:
    the only test that holds for root, read-only mounts and ACLs alike."""
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path} is a directory; give a file name, e.g. {os.path.join(path, 'run.json')}")
    check_out_dir(os.path.dirname(path) or ".", flag, path)  # the folder as given: the error names what was typed
    return path


def check_out_dir(directory: str, flag: str, path: str | None = None) -> None:
    """`directory`, created if missing, can be written in (a file is created there and removed); `path`: what
    the user gave, named in the error (the directory itself by default)."""
    said = f"{flag} {path or directory}"
    try:
        os.makedirs(directory, exist_ok=True)  # like the default --out, which creates results/
    except OSError as exc:
        why = "is not a directory" if isinstance(exc, (FileExistsError, NotADirectoryError)) else exc.strerror
        raise UsageError(f"{said}: cannot create the folder {directory} ({why}); choose another path") from None
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".loadgen-check-"):
            pass
    except OSError as exc:
        raise UsageError(f"{said}: cannot write in {directory} ({exc.strerror}); choose another path") from None


def parse_start_at(text: str, now_s: float | None = None) -> float:
    """'+30' → now + 30 s; '1767225600' → that Unix time; '2026-01-01T00:00:00+00:00' → that instant."""
    now_s = time.time() if now_s is None else now_s
    try:
        if text.startswith("+"):
            return now_s + float(text[1:])
        try:
            return float(text)
        except ValueError:
            return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise UsageError(f"--start-at {text!r}: give a Unix time, +SECONDS, or an ISO 8601 time") from None


def parse_workers(text: str) -> int | str:
    if text == "auto":
        return "auto"
    try:
        n = int(text)
    except ValueError:
        raise UsageError(f"--workers {text!r}: give a number ≥ 1 or auto") from None
    if n < 1:
        raise UsageError(f"--workers {n}: must be ≥ 1 (1 = this process only)")
    return n


def check_temperature(value: float) -> float:
    if not (math.isfinite(value) and value >= 0):
        raise UsageError(f"--temperature {value:g}: must be a finite number ≥ 0 (0 = greedy), e.g. 0 or 0.7")
    return value


def trust_config(a, cfg) -> None:
    """--force, --max-failed-fraction, --wait-ready onto the run's config."""
    f = a.max_failed_fraction
    if not (math.isfinite(f) and 0 <= f <= 1):
        raise UsageError(f"--max-failed-fraction {f:g}: must be between 0 and 1, e.g. 0.01 (1%)")
    w = cfg.wait_ready_s if a.wait_ready is None else a.wait_ready
    if not (math.isfinite(w) and w >= 0):
        raise UsageError(f"--wait-ready {w:g}: must be ≥ 0 seconds (0 = fail at once), e.g. 600")
    cfg.force, cfg.max_failed_fraction, cfg.wait_ready_s = a.force, f, w
    if a.wait_ready is not None:
        cfg.wait_refused_s = None  # told how long to wait: a refusing port is waited for as long
