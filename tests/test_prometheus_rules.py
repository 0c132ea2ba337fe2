"""Prometheus rule files: conventions, a firing and a quiet promtool test per alert, and promtool itself."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PROM = ROOT / "prometheus"
RULE_FILES = sorted((PROM / "rules").glob("*.yml"))
TEST_FILE = PROM / "tests" / "alerts_test.yml"
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
    """alertname -> {"fires": n, "quiet": n} over the promtool test file."""
    seen: dict[str, dict[str, int]] = {}
    for test in yaml.safe_load(TEST_FILE.read_text())["tests"]:
        for case in test.get("alert_rule_test", []):
            kind = "fires" if case.get("exp_alerts") else "quiet"
            counts = seen.setdefault(case["alertname"], {"fires": 0, "quiet": 0})
            counts[kind] += 1
    return seen


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


def test_recording_rules_are_named_level_metric_operation():
    recorded = rules("record")
    assert len(recorded) >= 10
    for r in recorded:
        assert RECORD_NAME.match(r["record"]), r["record"]
        assert "_total" not in r["record"], r["record"]  # rate() strips _total


def test_every_alert_has_severity_summary_description():
    alerts = rules("alert")
    names = [a["alert"] for a in alerts]
    assert len(names) == len(set(names))
    for a in alerts:
        assert ALERT_NAME.match(a["alert"]), a["alert"]
        assert a["labels"]["severity"] in {"critical", "warning", "info"}, a["alert"]
        assert a["annotations"]["summary"].strip() and "\n" not in a["annotations"]["summary"], a["alert"]
        assert len(a["annotations"]["description"]) > 40, a["alert"]


def test_the_issue_s_alerts_are_all_there():
    names = {a["alert"] for a in rules("alert")}
    assert {"SGLangServerDown", "LoadgenRequestsFailing", "LoadgenTTFTAboveSLO", "LoadgenThroughputBelowBaseline",
            "SpecDecodeAcceptLengthLow", "GPUPowerNearLimit", "GPUComputeIdleUnderLoad", "SGLangQueueBuilding",
            "LoadgenClientSaturated"} <= names


def test_each_alert_has_a_firing_and_a_quiet_promtool_test():
    seen = alert_tests()
    for name in (a["alert"] for a in rules("alert")):
        counts = seen.get(name, {"fires": 0, "quiet": 0})
        assert counts["fires"] >= 1, f"{name}: no test fires it"
        assert counts["quiet"] >= 1, f"{name}: no test shows it quiet"


def _promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["promtool", *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)


@needs_promtool
def test_promtool_check_rules():
    out = _promtool("check", "rules", "--lint=all", "--lint-fatal", *map(str, RULE_FILES))
    assert out.returncode == 0, out.stdout + out.stderr


@needs_promtool
def test_promtool_test_rules():
    out = _promtool("test", "rules", str(TEST_FILE))
    assert out.returncode == 0, out.stdout + out.stderr


@needs_promtool
def test_promtool_check_config():
    out = _promtool("check", "config", str(PROM / "prometheus.yml"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{len(RULE_FILES)} rule files found" in out.stdout


@pytest.mark.skipif(shutil.which("amtool") is None, reason="amtool not installed (Debian package "
                    "'prometheus-alertmanager')")
def test_amtool_check_alertmanager_config():
    out = subprocess.run(["amtool", "check-config", str(PROM / "alertmanager.yml")], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_alertmanager_config_routes_to_a_defined_receiver():
    doc = yaml.safe_load((PROM / "alertmanager.yml").read_text())
    receivers = {r["name"] for r in doc["receivers"]}
    assert doc["route"]["receiver"] in receivers
    assert all(r["receiver"] in receivers for r in doc["route"].get("routes", []))
