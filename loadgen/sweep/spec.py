"""The sweep file (TOML): read, validate every value, render every template — all before anything runs.

Reference of the format: docs/sweep.md. Each bad value is a UsageError naming the key and the fix. This module
holds the file's shape (its sections, the configurations of [grid] and [[configs]], readiness) and the
`SweepSpec` it becomes; its tables' keys become run flags in `table_flags`, [search] and [verify] are read by
`search_table` and `verify_spec`, and single values are read by `toml_values`.
"""

from __future__ import annotations

import itertools
import os
import re
import tomllib
from dataclasses import dataclass, field

from loadgen.client.api import APIS
from loadgen.errors import UsageError
from loadgen.files import read_input
from loadgen.sweep.search_table import SEARCH_FLAGS, check_search
from loadgen.sweep.table_flags import MATRIX_FLAGS, TELEMETRY_FLAGS, table_flags
from loadgen.sweep.template import render, render_argv, value_text
from loadgen.sweep.toml_values import argv_list, check_keys, is_number, string, table
from loadgen.sweep.verify_spec import reference_args, reference_first, verify_flags

TOP_KEYS = {"name", "out_dir", "reconfigure", "diagnostics", "server", "readiness", "expect", "matrix",
            "telemetry", "grid", "configs", "verify", "search", "tune"}  # tune: `loadgen tune`'s (docs/tune.md)
SERVER_KEYS = {"url", "api", "model", "api_key_env", "api_key_file"}
READINESS_KEYS = {"timeout_s", "poll_s", "successes", "reconfigure_timeout_s", "diagnostics_timeout_s",
                  "request_timeout_s"}
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass
class Readiness:
    timeout_s: float = 900.0
    poll_s: float = 2.0
    successes: int = 3
    reconfigure_timeout_s: float | None = None  # None: the configuration's readiness timeout
    diagnostics_timeout_s: float = 120.0
    request_timeout_s: float = 60.0


@dataclass
class Config:
    """One server configuration, its templates already rendered."""

    name: str
    params: dict
    url: str
    reconfigure: list[str]
    diagnostics: list[str] | None
    expect: dict
    timeout_s: float


@dataclass
class SweepSpec:
    path: str
    text: str
    name: str
    out_dir: str
    api: str
    model: str | None
    readiness: Readiness
    configs: list[Config]
    run_flags: list[str] = field(default_factory=list)  # matrix + telemetry + server flags shared by all
    matrix: dict = field(default_factory=dict)
    verify_reference: str | None = None  # [verify] reference: the configuration whose outputs are the reference
    search: dict = field(default_factory=dict)  # [search]: each configuration's capacity is searched for

    def run_argv(self, cfg: Config, out_path: str) -> list[str]:
        """The `loadgen` run arguments that measure `cfg` (parsed by the normal command line). With a
        [verify] reference configuration, it saves its reference beside its results and the others read it."""
        return ["--url", cfg.url, "--label", cfg.name, "--out", out_path, *self.run_flags,
                *reference_args(self.out_dir, self.verify_reference, cfg.name)]

    def settings(self, cfg: Config) -> dict:
        """What a finished cell was measured under: a stored cell is reused only when these are equal."""
        matrix = {k: v for k, v in self.matrix.items() if k not in ("contexts", "concurrency")}
        slo = {k: v for k, v in self.search.items() if k.startswith("slo")}  # the probes' figures depend on them
        return {"params": cfg.params, "api": self.api, "model": self.model, "matrix": matrix} | (
            {"slo": slo} if slo else {})


def load_spec(path: str, out_dir: str | None = None) -> SweepSpec:
    raw = read_input(path, "give the path of a sweep TOML file", "sweep file")
    text = raw.decode("utf-8", "replace")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML ({exc}); fix the syntax") from None
    return parse_spec(doc, path, text, out_dir)


def parse_spec(doc: dict, path: str, text: str = "", out_dir: str | None = None) -> SweepSpec:
    check_keys(doc, TOP_KEYS, path)
    base = os.path.dirname(os.path.abspath(path))
    name = string(doc, "name", path, os.path.splitext(os.path.basename(path))[0])
    if not NAME.fullmatch(name):
        raise UsageError(f"{path}: name = {name!r}: use letters, digits, _ . - (it names the results folder)")
    server = table(doc, "server", path, required=True)
    check_keys(server, SERVER_KEYS, f"{path} [server]")
    url = string(server, "url", f"{path} [server]")
    if url is None:
        raise UsageError(f"{path} [server]: url is missing; e.g. url = \"http://gpu-host:30000\"")
    api = string(server, "api", f"{path} [server]", "openai-chat")
    if api not in APIS:
        raise UsageError(f"{path} [server]: api = {api!r} is unknown; choose one of {', '.join(APIS)}")
    model = string(server, "model", f"{path} [server]")
    reconfigure = argv_list(doc, "reconfigure", path, required=True)
    diagnostics = argv_list(doc, "diagnostics", path)
    readiness = _readiness(table(doc, "readiness", path), f"{path} [readiness]")
    expect = table(doc, "expect", path)
    matrix, verify = table(doc, "matrix", path, required=True), table(doc, "verify", path)
    flags = ["--api", api] + (["--model", model] if model else [])
    flags += [w for key in ("api_key_env", "api_key_file") if string(server, key, f"{path} [server]")
              for w in ("--" + key.replace("_", "-"), server[key])]
    flags += table_flags(matrix, MATRIX_FLAGS, f"{path} [matrix]", base)
    flags += table_flags(table(doc, "telemetry", path), TELEMETRY_FLAGS, f"{path} [telemetry]", base)
    flags += verify_flags(verify, f"{path} [verify]", base)
    search = table(doc, "search", path)
    check_search(search, matrix, path)
    flags += table_flags(search, SEARCH_FLAGS, f"{path} [search]", base)
    out_dir = out_dir or string(doc, "out_dir", path) or os.path.join("results", name)
    configs = [_config(params, where, path, out_dir, url, reconfigure, diagnostics, expect, readiness)
               for params, where in _config_params(doc, path)]
    names = [c.name for c in configs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UsageError(f"{path}: configuration names repeat ({', '.join(dup)}); give each a unique name")
    reference = reference_first(configs, verify.get("reference"), f"{path} [verify]")
    return SweepSpec(path=path, text=text, name=name, out_dir=out_dir, api=api,
                     model=model, readiness=readiness, configs=configs, run_flags=flags, matrix=dict(matrix),
                     verify_reference=reference, search=dict(search))


def _config_params(doc: dict, path: str) -> list[tuple[dict, str]]:
    """[grid] (Cartesian product, in key order) then [[configs]], each as (params, where)."""
    out = []
    grid = table(doc, "grid", path)
    if grid:
        for key, values in grid.items():
            if not isinstance(values, list) or not values:
                raise UsageError(f"{path} [grid]: {key} must be a non-empty list, e.g. {key} = [16, 32, 64]")
        keys = list(grid)
        for combo in itertools.product(*(grid[k] for k in keys)):
            params = dict(zip(keys, combo))
            out.append((params, f"{path} [grid] {params}"))
    listed = doc.get("configs", [])
    if not isinstance(listed, list) or not all(isinstance(c, dict) for c in listed):
        raise UsageError(f"{path}: configs must be an array of tables ([[configs]] sections)")
    out += [(dict(c), f"{path} [[configs]] #{i + 1}") for i, c in enumerate(listed)]
    if not out:
        raise UsageError(f"{path}: no configurations; add [[configs]] sections (or a [grid] table)")
    return out


def _config(params: dict, where: str, path: str, out_dir: str, url: str, reconfigure, diagnostics, expect,
            readiness) -> Config:
    name = params.pop("name", None)
    timeout_s = params.pop("timeout_s", readiness.timeout_s)
    if not is_number(timeout_s) or timeout_s <= 0:
        raise UsageError(f"{where}: timeout_s = {timeout_s!r} must be a number of seconds > 0")
    values = {k: value_text(k, v, where) for k, v in params.items()}
    if name is None:
        name = "_".join(f"{k}{v}" for k, v in values.items()) or "default"
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise UsageError(f"{where}: name = {name!r}: use letters, digits, _ . - (it names the results file)")
    values["name"] = name
    values.setdefault("out_dir", out_dir)  # {out_dir}: the results folder, --out-dir's when given
    where = f"{path} {name}"  # named now: short, so that an error about its templates fits one line
    rendered_expect = {}
    for key, want in expect.items():
        if isinstance(want, str):
            want = render(want, values, f"{where} [expect] {key}")
        elif isinstance(want, (dict, list)):
            raise UsageError(f"{where} [expect]: {key} must be a scalar; use a dotted key for nested values")
        rendered_expect[key] = want
    diag = render_argv(diagnostics, values, f"{where} diagnostics") if diagnostics else None
    return Config(name=name, params=params, url=render(url, values, f"{where} [server] url"),
                  reconfigure=render_argv(reconfigure, values, f"{where} reconfigure"), diagnostics=diag,
                  expect=rendered_expect, timeout_s=float(timeout_s))


def _readiness(t: dict, where: str) -> Readiness:
    check_keys(t, READINESS_KEYS, where)
    r = Readiness()
    for key in READINESS_KEYS:
        if key in t:
            v = t[key]
            if not is_number(v) or v <= 0:
                raise UsageError(f"{where}: {key} = {v!r} must be a number > 0")
            if key == "successes" and not isinstance(v, int):
                raise UsageError(f"{where}: successes = {v!r} must be a whole number, e.g. 3")
            setattr(r, key, v)
    return r
