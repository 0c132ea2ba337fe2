"""Prometheus rule files: conventions, a firing and a quiet promtool test per alert, and promtool itself."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.untimed  # its tests of other tiers than unit time nothing against the machine

ROOT = Path(__file__).resolve().parents[1]
PROM = ROOT / "prometheus"
RULE_FILES = sorted((PROM / "rules").glob("*.yml"))
TEST_FILE = PROM / "tests" / "alerts_test.yml"
TEST_FILES = sorted((PROM / "tests").glob("*_test.yml"))  # alerts_test.yml and a file per feature (verify_test.yml)
RECORD_NAME = re.compile(r"^[a-z][a-z_]*:[a-z][a-z0-9_]*:[a-z][a-z0-9_]*$")
ALERT_NAME = re.compile(r"^[A-Z][A-Za-z0-9]+$")
needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None,
                                    reason="promtool not installed (Debian package 'prometheus')")


def rules(kind: str) -> list[dict]:
    out = []
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            out += [r for r in group["rules"] if kind in r]
    return out


def alert_tests() -> dict[str, dict[str, int]]:
    """alertname -> {"fires": n, "quiet": n} over the promtool test files."""
    seen: dict[str, dict[str, int]] = {}
    for test in (t for path in TEST_FILES for t in yaml.safe_load(path.read_text())["tests"]):
        for case in test.get("alert_rule_test", []):
            kind = "fires" if case.get("exp_alerts") else "quiet"
            counts = seen.setdefault(case["alertname"], {"fires": 0, "quiet": 0})
            counts[kind] += 1
    return seen


@pytest.mark.unit
def test_rule_files_exist_and_groups_are_2_42_compatible():
    assert RULE_FILES, "no rule files"
    names = []
    for path in RULE_FILES:
        doc = yaml.safe_load(path.read_text())
        for group in doc["groups"]:
            # group-level labels/limit-free keys only: Prometheus 2.42 rejects `labels` on a group
            assert set(group) <= {"name", "interval", "rules"}, (path.name, group["name"])
            names.append(group["name"])
    assert len(names) == len(set(names))


@pytest.mark.unit
def test_recording_rules_are_named_level_metric_operation():
    recorded = rules("record")
    assert len(recorded) >= 10
    for r in recorded:
        assert RECORD_NAME.match(r["record"]), r["record"]
        assert "_total" not in r["record"], r["record"]  # rate() strips _total


@pytest.mark.unit
def test_every_alert_has_severity_summary_description():
    alerts = rules("alert")
    names = [a["alert"] for a in alerts]
    assert len(names) == len(set(names))
    for a in alerts:
        assert ALERT_NAME.match(a["alert"]), a["alert"]
        assert a["labels"]["severity"] in {"critical", "warning", "info"}, a["alert"]
        assert a["annotations"]["summary"].strip() and "\n" not in a["annotations"]["summary"], a["alert"]
        assert len(a["annotations"]["description"]) > 40, a["alert"]


@pytest.mark.unit
def test_the_expected_alerts_are_all_there():
    names = {a["alert"] for a in rules("alert")}
    assert {"SGLangServerDown", "LoadgenRequestsFailing", "LoadgenTTFTAboveSLO", "LoadgenThroughputBelowBaseline",
            "SpecDecodeAcceptLengthLow", "GPUPowerNearLimit", "GPUComputeIdleUnderLoad", "SGLangQueueBuilding",
            "LoadgenClientSaturated", "GPUXidError", "GPUThrottled", "LoadgenGarbageOutput",
            "GPUsIdleWhileRequestsWait"} <= names


def _gated(expr: str, recorded: dict[str, str], depth: int = 0) -> bool:
    """The expression (or a recording rule it reads) requires a measuring run or an active cell."""
    if "loadgen_run_active" in expr or "loadgen_cell_active" in expr:
        return True
    return depth < 3 and any(name in expr and _gated(body, recorded, depth + 1) for name, body in recorded.items())


@pytest.mark.unit
def test_every_alert_is_gated_on_a_measuring_run_or_an_active_cell():
    recorded = {r["record"]: r["expr"] for r in rules("record")}
    for a in rules("alert"):
        assert _gated(a["expr"], recorded), f"{a['alert']} could fire after a run has ended"


def _seconds(duration: str) -> float:
    value, unit = re.fullmatch(r"(\d+)([smh])", duration).groups()
    return int(value) * {"s": 1, "m": 60, "h": 3600}[unit]


@pytest.mark.unit
def test_cell_alerts_can_fire_within_a_45_s_cell():
    """A rate window plus its gate plus `for:` must fit in a 45 s cell (60 s for the baseline)."""
    by_name = {a["alert"]: a for a in rules("alert")}
    for name, cell_s in (("LoadgenTTFTAboveSLO", 45), ("LoadgenRequestsFailing", 45),
                         ("GPUComputeIdleUnderLoad", 45), ("LoadgenThroughputBelowBaseline", 60),
                         ("LoadgenSLOAttainmentBelowTarget", 45)):
        assert _seconds(by_name[name].get("for", "0s")) <= cell_s / 3, name
    for r in rules("record"):
        for window in re.findall(r"\[(\d+[smh])\]", r["expr"]):
            assert _seconds(window) <= 30 or r["record"].endswith("median7d") or "limit" in r["record"], r["record"]


@pytest.mark.unit
def test_the_benchmark_scale_cases_have_promtool_tests():
    names = " | ".join(t["name"] for path in TEST_FILES for t in yaml.safe_load(path.read_text())["tests"])
    for needle in ("LoadgenGarbageOutput fires within a 45 s cell","LoadgenTTFTAboveSLO fires within a 45 s cell", "LoadgenRequestsFailing fires within a 45 s cell",
                   "GPUComputeIdleUnderLoad fires within a 45 s cell", "quiet after the run",
                   "2x slowdown within one 60 s cell", "the current run is left out of its own baseline",
                   "one lag spike at the end of a run"):
        assert needle in names, needle


@pytest.mark.unit
def test_each_alert_has_a_firing_and_a_quiet_promtool_test():
    seen = alert_tests()
    for name in (a["alert"] for a in rules("alert")):
        counts = seen.get(name, {"fires": 0, "quiet": 0})
        assert counts["fires"] >= 1, f"{name}: no test fires it"
        assert counts["quiet"] >= 1, f"{name}: no test shows it quiet"


def _promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["promtool", *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.infra
@needs_promtool
def test_promtool_check_rules():
    out = _promtool("check", "rules", "--lint=all", "--lint-fatal", *map(str, RULE_FILES))
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.infra
@needs_promtool
def test_promtool_test_rules():
    out = _promtool("test", "rules", *map(str, TEST_FILES))
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.infra
@needs_promtool
def test_promtool_check_config():
    out = _promtool("check", "config", str(PROM / "prometheus.yml"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{len(RULE_FILES)} rule files found" in out.stdout


@pytest.mark.infra
@pytest.mark.skipif(shutil.which("amtool") is None, reason="amtool not installed (Debian package "
                    "'prometheus-alertmanager')")
def test_amtool_check_alertmanager_config():
    out = subprocess.run(["amtool", "check-config", str(PROM / "alertmanager.yml")], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.unit
def test_alertmanager_config_routes_to_a_defined_receiver():
    doc = yaml.safe_load((PROM / "alertmanager.yml").read_text())
    receivers = {r["name"] for r in doc["receivers"]}
    assert doc["route"]["receiver"] in receivers
    assert all(r["receiver"] in receivers for r in doc["route"].get("routes", []))
