"""One adapter per engine: detection stage by stage through the registry, a new engine (TGI) as one module, and
a server that answers only the OpenAI routes recognised by no adapter yet measured (the fallback)."""

from __future__ import annotations

import asyncio
import importlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from loadgen.engines import registry
from loadgen.engines.base import LaunchFlags, MetricRole
from loadgen.files import read_json, read_jsonl
from loadgen.target.discover import Target, discover
from loadgen.telemetry.promtext import parse_samples
from loadgen.telemetry.server_metrics import ServerMetricsSource
from tests.conftest import ROOT, run_loadgen
from tests.openai_only import MODEL, TGI_INFO

SG_INFO = {"model_path": "m", "context_length": 4096, "speculative_algorithm": "EAGLE", "last_gen_throughput": 1.0}
LLAMA_PROPS = {"build_info": "b1", "default_generation_settings": {"n_ctx": 512}, "total_slots": 2}


class FakeProbe:
    """The answers of a server, by route; records the routes asked, in order."""

    def __init__(self, answers: dict[str, Any], models: Any = None, header: str | None = None):
        self.url = "http://127.0.0.1:9"
        self.models = models or {"data": [{"id": "m", "owned_by": "someone"}]}
        self.server_header = header
        self.model = "m"
        self.answers = answers
        self.asked: list[str] = []

    async def get_json(self, path: str) -> tuple[int | None, Any]:
        self.asked.append(path)
        return (200, self.answers[path]) if path in self.answers else (404, None)

    def local_launch(self, launch: LaunchFlags) -> tuple[dict[str, Any] | None, str | None]:
        return None, "not local"


def detect(probe: FakeProbe) -> tuple[str, dict, int | None] | None:
    found = asyncio.run(registry.detect(probe))
    return None if found is None else (found[0].name, found[1].server_info, found[1].context_length)


@pytest.mark.unit
def test_tgi_is_recognised_by_its_info_route():
    probe = FakeProbe({"/info": TGI_INFO})
    assert detect(probe) == ("tgi", TGI_INFO, 2048)
    assert probe.asked == ["/server_info", "/get_server_info", "/version", "/info"]
    assert detect(FakeProbe({"/info": {"model_id": "x"}})) is None  # not TGI's shape: not TGI


@pytest.mark.unit
def test_a_server_with_only_the_openai_routes_is_recognised_by_no_adapter():
    probe = FakeProbe({})
    assert detect(probe) is None
    assert probe.asked == ["/server_info", "/get_server_info", "/version", "/info", "/props"]
    assert registry.adapter("openai") is registry.FALLBACK and registry.adapter("unknown") is registry.FALLBACK
    target = Target("u", "openai-chat", "m")
    assert target.engine == "openai" and target.spec_settings() == {} and target.adapter is registry.FALLBACK


@pytest.mark.unit
@pytest.mark.parametrize("answers, header, engine", [
    ({"/server_info": SG_INFO, "/info": TGI_INFO}, "llama.cpp", "llamacpp"),  # marks before any route
    ({"/server_info": SG_INFO, "/version": {"version": "1"}, "/info": TGI_INFO}, None, "sglang"),
    ({"/get_server_info": SG_INFO}, None, "sglang"),
    ({"/version": {"version": "0.9"}, "/info": TGI_INFO, "/props": LLAMA_PROPS}, None, "vllm"),
    ({"/info": TGI_INFO, "/props": LLAMA_PROPS}, None, "tgi"),  # routes before a shape
    ({"/props": LLAMA_PROPS}, None, "llamacpp"),
])
def test_detection_runs_stage_by_stage_in_registry_order(answers, header, engine):
    assert detect(FakeProbe(answers, header=header))[0] == engine


@pytest.mark.unit
def test_the_fingerprint_and_spec_settings_are_the_adapters():
    sglang = Target("u", "openai-chat", "m", "sglang", dict(SG_INFO))
    assert sglang.spec_settings() == {"speculative_algorithm": "EAGLE"}
    moved = Target("u", "openai-chat", "m", "sglang", {**SG_INFO, "last_gen_throughput": 9.0})
    assert moved.fingerprint() == sglang.fingerprint()  # a reading, not a setting
    tgi = Target("u", "openai-chat", "m", "tgi", dict(TGI_INFO))
    assert tgi.spec_settings() == {} and tgi.fingerprint() != Target("u", "openai-chat", "m").fingerprint()


@pytest.mark.unit
def test_tgi_metric_names_detect_it_and_feed_the_queue_figures():
    text = "# TYPE tgi_queue_size gauge\ntgi_queue_size 3\ntgi_batch_current_size 5\n"
    assert registry.engine_from_metrics(text) is registry.adapter("tgi")
    src = ServerMetricsSource("http://x/metrics")
    src.ingest(parse_samples(text), 0)
    src.ingest(parse_samples(text.replace(" 3\n", " 1\n")), 1_000_000_000)
    values = src.result().values
    assert values["queue"] == {"queue_size_mean": 1.0, "batch_current_size_mean": 5.0}
    assert values["unavailable"]["counters"] == ("the server exports neither sglang:spec_verify_calls_total nor "
                                                 "vllm:spec_decode_num_drafts_total nor "
                                                 "llamacpp:spec_decode_num_drafts_total")


@pytest.mark.unit
def test_each_engine_is_one_module_with_one_adapter():
    names = [a.name for a in (*registry.ADAPTERS, registry.FALLBACK)]
    assert len(set(names)) == len(names)
    for a in registry.ADAPTERS:
        module = importlib.import_module(type(a).__module__)
        assert module.ADAPTER is a and a.stages, a.name
        assert all(m.name.startswith(a.metric_prefix) for m in a.metrics), a.name
        assert len({m.role for m in a.metrics}) == len(a.metrics), f"{a.name}: one metric per role"
    assert registry.metric_names(MetricRole.QUEUED) == ("sglang:num_queue_reqs", "vllm:num_requests_waiting",
                                                        "tgi_queue_size")


@pytest.mark.unit
def test_engine_names_live_only_in_their_adapters():
    """No metric name of an engine is written outside loadgen/engines/ in the code that asks the adapters."""
    asking = [ROOT / "loadgen" / p for p in ("target", "telemetry", "workload/tokenizers.py")]
    files = [f for p in asking for f in ([p] if p.is_file() else sorted(p.glob("*.py")))]
    names = [m.name for a in registry.ADAPTERS for m in a.metrics]
    found = [f"{f.relative_to(ROOT)}: {n}" for f in files for n in names if f"\"{n}\"" in f.read_text()]
    assert found == []


def start(*args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.openai_only", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT)
    m = re.search(rb"ready on (http://\S+)", proc.stdout.readline())
    assert m, proc.stderr.read()
    return proc, m.group(1).decode()


@pytest.fixture
def server(request):
    proc, url = start(*request.param)
    yield url
    proc.kill()
    proc.wait()


def measure(url: str, out: Path):
    proc = run_loadgen("--url", url, "--concurrency", "1,2", "--contexts", "64", "--max-tokens", "8",
                       "--requests-per-cell", "6", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    records = [r for r in read_jsonl(str(out)[:-5] + ".requests.jsonl") if r["phase"] == "measure"]
    return read_json(str(out)), records, proc


@pytest.mark.sim
@pytest.mark.parametrize("server", [()], indirect=True)
def test_a_server_answering_only_the_openai_routes_is_openai_generic_and_measured(server, tmp_path):
    doc, records, proc = measure(server, tmp_path / "plain.json")
    assert doc["target"]["engine"] == "openai" and doc["target"]["server_info"] == {}
    assert doc["target"]["model"] == MODEL and doc["prompt_sizing"]["estimated"]
    assert "engine=openai" in proc.stderr
    assert [c["status"] for c in doc["cells"]] == ["ok", "ok"]
    assert len(records) == 12 and all(r["outcome"] == "ok" and r["completion_tokens"] == 8 for r in records)
    assert doc["cells"][0]["telemetry"]["server_metrics"]["available"] is False  # no /metrics of its own


@pytest.mark.sim
@pytest.mark.parametrize("server", [("--tgi",)], indirect=True)
def test_a_tgi_router_is_detected_by_its_adapter_and_its_queue_scraped(server, tmp_path):
    target = asyncio.run(_discover(server))
    assert target.engine == "tgi" and target.max_model_len == 2048 and target.server_info == TGI_INFO
    doc, records, proc = measure(server, tmp_path / "tgi.json")
    assert doc["target"]["engine"] == "tgi" and "engine=tgi" in proc.stderr
    assert all(r["outcome"] == "ok" for r in records) and len(records) == 12
    queue = doc["cells"][1]["telemetry"]["server_metrics"]["queue"]
    assert set(queue) == {"batch_current_size_mean", "queue_size_mean"} and queue["queue_size_mean"] == 0.0


async def _discover(url: str) -> Target:
    async with aiohttp.ClientSession() as session:
        return await discover(session, url, "openai-chat", None, "OPENAI_API_KEY")
