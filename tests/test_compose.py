"""docker-compose.yml: validated by Debian's docker-compose 1.29 and checked against the rest of the stack
(scrape targets, mounts, provisioning paths, the dcgm-exporter counters file, the loadgen flags it uses)."""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
PROMETHEUS = yaml.safe_load((ROOT / "prometheus" / "prometheus.yml").read_text())
needs_compose = pytest.mark.skipif(shutil.which("docker-compose") is None,
                                   reason="docker-compose not installed (Debian package 'docker-compose')")


def compose(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != "GRAFANA_ADMIN_PASSWORD"}
    full_env.update(env or {})
    return subprocess.run(["docker-compose", "-f", str(ROOT / "docker-compose.yml"), *args], cwd=ROOT,
                          env=full_env, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.infra
@needs_compose
@pytest.mark.parametrize("profile", [None, "gpu", "nvml", "demo"])
def test_docker_compose_1_29_accepts_every_profile(profile):
    args = ["--profile", profile] if profile else []
    out = compose(*args, "config", "-q", env={"GRAFANA_ADMIN_PASSWORD": "test-only"})
    assert out.returncode == 0, out.stderr


@pytest.mark.infra
@needs_compose
def test_grafana_admin_password_is_required():
    out = compose("config", "-q")
    assert out.returncode != 0 and "GRAFANA_ADMIN_PASSWORD" in out.stderr


@pytest.mark.unit
def test_compatible_with_docker_compose_1_29():
    # rejected by 1.29 although the compose spec has them
    assert "name" not in COMPOSE and "version" not in COMPOSE
    for name, svc in SERVICES.items():
        assert "gpus" not in svc, name
        assert "start_interval" not in svc.get("healthcheck", {}), name


@pytest.mark.unit
def test_every_service_has_a_healthcheck_except_the_looping_client():
    for name, svc in SERVICES.items():
        if name != "loadgen-demo":
            assert svc["healthcheck"]["test"][0] == "CMD", name


@pytest.mark.unit
def test_profiles():
    assert {n for n, s in SERVICES.items() if "profiles" not in s} == {"prometheus", "alertmanager", "grafana"}
    assert SERVICES["dcgm-exporter"]["profiles"] == ["gpu"]
    assert SERVICES["sim"]["profiles"] == SERVICES["loadgen-demo"]["profiles"] == ["demo"]


@pytest.mark.unit
def test_prometheus_gets_its_config_rules_and_alertmanager():
    volumes = SERVICES["prometheus"]["volumes"]
    assert "./prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in volumes
    assert "./prometheus/rules:/etc/prometheus/rules:ro" in volumes
    assert PROMETHEUS["rule_files"] == ["rules/*.yml"]  # relative to the config: works here and in the container
    (am,) = PROMETHEUS["alerting"]["alertmanagers"]
    am_addr = next(a for a in SERVICES["alertmanager"]["command"] if a.startswith("--web.listen-address="))
    assert am["static_configs"][0]["targets"] == [am_addr.split("=", 1)[1]]
    assert PROMETHEUS["global"]["scrape_interval"] in ("1s", "2s", "5s")


@pytest.mark.unit
def test_grafana_is_provisioned_with_anonymous_viewers():
    g = SERVICES["grafana"]
    env = g["environment"]
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "true" and env["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    assert env["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD")
    provider = yaml.safe_load((ROOT / "grafana/provisioning/dashboards/loadgen.yml").read_text())["providers"][0]
    assert f"./grafana/dashboards:{provider['options']['path']}:ro" in g["volumes"]
    assert "./grafana/provisioning:/etc/grafana/provisioning:ro" in g["volumes"]
    home = env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert (ROOT / "grafana/dashboards" / Path(home).name).exists()
    ds = yaml.safe_load((ROOT / "grafana/provisioning/datasources/loadgen.yml").read_text())["datasources"]
    prom_addr = next(a for a in SERVICES["prometheus"]["command"] if a.startswith("--web.listen-address="))
    assert next(d for d in ds if d["type"] == "prometheus")["url"] == "http://" + prom_addr.split("=", 1)[1]


@pytest.mark.unit
def test_dcgm_exporter_collects_every_second_with_power_limits():
    svc = SERVICES["dcgm-exporter"]
    cmd = svc["command"]
    assert int(cmd[cmd.index("-c") + 1]) <= 1000
    csv_in_container = cmd[cmd.index("-f") + 1]
    (mount,) = [v for v in svc["volumes"] if v.split(":")[1] == csv_in_container]
    rows = [r for r in csv.reader((ROOT / mount.split(":")[0]).read_text().splitlines())
            if r and not r[0].lstrip().startswith("#")]
    assert all(len(r) == 3 and r[1].strip() in ("gauge", "counter", "label") for r in rows), rows
    fields = {r[0].strip() for r in rows}
    assert {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_POWER_MGMT_LIMIT",
            "DCGM_FI_DEV_GPU_UTIL"} <= fields
    assert svc["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]


def scrape_ports() -> dict[str, int]:
    return {job["job_name"]: int(job["static_configs"][0]["targets"][0].rsplit(":", 1)[1])
            for job in PROMETHEUS["scrape_configs"]}


def flag(argv: list[str] | str, name: str) -> str:
    text = argv if isinstance(argv, str) else " ".join(argv)
    m = re.search(rf"{re.escape(name)}[ =](\S+)", text)
    assert m, f"{name} missing in {text}"
    return m.group(1)


@pytest.mark.unit
def test_scrape_targets_match_the_services():
    ports = scrape_ports()
    assert set(ports) == {"loadgen", "sglang", "dcgm"}
    assert int(flag(SERVICES["sim"]["command"], "--port")) == ports["sglang"]
    assert int(flag(SERVICES["sim"]["command"], "--dcgm-port")) == ports["dcgm"]
    assert int(flag(SERVICES["dcgm-exporter"]["command"], "-a").rsplit(":", 1)[1]) == ports["dcgm"]
    assert int(flag(SERVICES["nvml-exporter"]["command"], "--port")) == ports["dcgm"]
    demo = SERVICES["loadgen-demo"]["command"][0]
    assert int(flag(demo, "--metrics-port")) == ports["loadgen"]
    assert flag(demo, "--url") == f"http://127.0.0.1:{ports['sglang']}"
    assert flag(demo, "--dcgm") == f"http://127.0.0.1:{ports['dcgm']}/metrics"


@pytest.mark.unit
def test_demo_uses_only_flags_loadgen_has(cli):
    """The looping demo client and the simulator must use flags the CLI really accepts."""
    run_help = cli("--help").stdout
    sim_help = cli("sim", "--help").stdout
    for f in set(re.findall(r"(--[a-z][a-z-]+)", SERVICES["loadgen-demo"]["command"][0])):
        assert f in run_help, f"loadgen has no {f}"
    for f in (a for a in SERVICES["sim"]["command"] if a.startswith("--")):
        assert f in sim_help, f"loadgen sim has no {f}"


@pytest.mark.unit
def test_dockerfile_installs_the_package_with_the_exporters():
    text = (ROOT / "Dockerfile").read_text()
    assert "COPY exporters" in text and "COPY loadgen" in text and 'ENTRYPOINT ["loadgen"]' in text
    assert "USER nobody" in text
