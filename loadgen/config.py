"""Run configuration, parsed and validated at the edge (every bad value → UsageError with the fix)."""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass, field
from urllib.parse import urlparse

from loadgen.api import APIS
from loadgen.errors import UsageError


def parse_int_list(flag: str, text: str, minimum: int = 1) -> list[int]:
    """'1,32,64' → [1, 32, 64]; empty items, non-integers and values below `minimum` are errors."""
    items = text.split(",")
    out = []
    for item in items:
        item = item.strip()
        if not item:
            raise UsageError(f"{flag}: empty item in {text!r}; give comma-separated integers like 1,32,64")
        try:
            value = int(item)
        except ValueError:
            raise UsageError(f"{flag}: {item!r} is not an integer; give comma-separated integers like 1,32,64") \
                from None
        if value < minimum:
            raise UsageError(f"{flag}: {value} is below {minimum}; every value must be ≥ {minimum}")
        if value in out:
            raise UsageError(f"{flag}: {value} appears twice in {text!r}; give each value once")
        out.append(value)
    return out


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


def check_api(api: str) -> str:
    if api not in APIS:
        raise UsageError(f"--api {api!r} is unknown; choose one of {', '.join(APIS)}")
    return api


def check_out_path(path: str) -> str:
    """The results path, checked by creating (and removing) a file beside it: the only test that holds for
    root, read-only mounts and ACLs alike."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"--out {path} is a directory; give a file name, e.g. {os.path.join(path, 'run.json')}")
    if not os.path.isdir(directory):
        what = "is not a directory" if os.path.exists(directory) else "does not exist"
        raise UsageError(f"--out {path}: {directory} {what}; create the directory or choose another path")
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".loadgen-check-"):
            pass
    except OSError as exc:
        raise UsageError(f"--out {path}: cannot write in {directory} ({exc.strerror}); choose another path") \
            from None
    return path


def default_requests_per_cell(concurrency: int) -> int:
    """Two full waves of the concurrency, at least 16: enough for stable means at every level."""
    return max(16, 2 * concurrency)


@dataclass
class RunConfig:
    url: str | None
    api: str = "openai-chat"
    model: str | None = None
    concurrency: list[int] = field(default_factory=lambda: [1, 32, 64, 128])
    contexts: list[int] = field(default_factory=lambda: [60, 1024])
    max_tokens: int = 512
    requests_per_cell: int | None = None
    duration_per_cell_s: float | None = None
    warmup: int = 0
    label: str | None = None
    out: str | None = None
    seed: int = 0
    timeout_s: float = 600.0
    idle_timeout_s: float = 120.0
    api_key_env: str = "OPENAI_API_KEY"
    api_key_file: str | None = None
    prompts_file: str | None = None
    temperature: float = 0.0
    ignore_eos: bool = True
    sim_args: list[str] = field(default_factory=list)
    extras: dict = field(default_factory=dict)  # options owned by plug-ins (telemetry, exporter, open loop)

    def requests_for(self, concurrency: int) -> int:
        return self.requests_per_cell or default_requests_per_cell(concurrency)

    def api_key(self) -> str | None:
        """The key from --api-key-file, else from the environment variable; never from the command line."""
        if self.api_key_file:
            try:
                with open(self.api_key_file, encoding="utf-8") as fh:
                    key = fh.read().strip()
            except (OSError, UnicodeDecodeError) as exc:
                why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
                raise UsageError(f"--api-key-file {self.api_key_file}: {why}; give a file that holds the key") \
                    from None
            if not key or "\n" in key:
                raise UsageError(f"--api-key-file {self.api_key_file} must hold the key on one line (it holds "
                                 f"{'nothing' if not key else 'several lines'})")
            return key
        return os.environ.get(self.api_key_env) or None

    def public_args(self) -> dict:
        """The arguments as stored in results: never the key itself."""
        d = {k: v for k, v in self.__dict__.items() if k not in ("extras",)}
        d.update({k: v for k, v in self.extras.items() if "key" not in k.lower()})
        return d
