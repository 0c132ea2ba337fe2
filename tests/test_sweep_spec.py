"""The sweep file and the readiness gate, without the simulator: templates, validation (each bad input one
line, exit 2), the documented example, and the gate's three conditions against a small real HTTP server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from loadgen.errors import UsageError
from loadgen.sweep.spec import load_spec, parse_spec
from loadgen.sweep.template import render
from loadgen.target.readiness import wait_ready

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "ddtree_budget_sweep.toml"

BASE = {
    "reconfigure": ["ssh", "gpu-host", "bash /root/reconfig_ddtree.sh {budget} {topk}"],
    "server": {"url": "http://127.0.0.1:30000"},
    "matrix": {"contexts": [60], "concurrency": [1, 4]},
    "configs": [{"name": "b16", "budget": 16, "topk": 8}],
}


def spec_of(**changes):
    doc = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE.items()} | changes
    return parse_spec(doc, "sweep.toml")


@pytest.mark.unit
def test_docs_example_parses_and_every_configuration_validates(tmp_path):
    from loadgen.cli.sweep import CommandLineRuns
    from loadgen.sweep.runner import plan_sweep
    spec = load_spec(str(EXAMPLE))
    assert [c.name for c in spec.configs] == ["b16_t8", "b32_t8", "b64_t8"]
    b32 = spec.configs[1]
    assert b32.reconfigure == ["ssh", "root@gpu-host", "bash /root/reconfig_ddtree.sh 32 8 0 16"]
    assert b32.expect == {"speculative_ddtree_budget": "32", "speculative_eagle_topk": "8"}
    assert b32.timeout_s == 900
    spec.out_dir = str(tmp_path)
    plans = plan_sweep(spec, force=False, only=None, runs=CommandLineRuns(spec.path))
    cfg = plans[0].run_cfg
    assert (cfg.contexts, cfg.concurrency, cfg.max_tokens, cfg.url) == ([60, 1024], [1, 32, 64], 512,
                                                                        "http://gpu-host:30000")
    assert cfg.label == "b16_t8" and cfg.out == str(tmp_path / "b16_t8.json")


@pytest.mark.unit
def test_templates_render_values_and_literal_braces():
    assert render("x{a}-{{b}}", {"a": "16"}, "w") == "x16-{b}"
    spec = spec_of(configs=[{"budget": 16, "topk": 8}])
    assert spec.configs[0].name == "budget16_topk8"
    assert spec.configs[0].reconfigure[-1] == "bash /root/reconfig_ddtree.sh 16 8"
    grid = spec_of(configs=[], grid={"budget": [16, 32], "topk": [8]})
    assert [c.name for c in grid.configs] == ["budget16_topk8", "budget32_topk8"]


@pytest.mark.unit
def test_python_placeholder_is_the_interpreter_running_loadgen():
    import sys
    spec = spec_of(reconfigure=["{python}", "-m", "loadgen", "sim", "--budget", "{budget}"])
    assert spec.configs[0].reconfigure == [sys.executable, "-m", "loadgen", "sim", "--budget", "16"]
    own = spec_of(reconfigure=["{python}"], configs=[{"name": "b", "python": "/opt/py/bin/python3"}])
    assert own.configs[0].reconfigure == ["/opt/py/bin/python3"]


@pytest.mark.unit
@pytest.mark.parametrize("value", ["16; reboot", "$(id)", "16 && rm -rf /", "`id`", "a|b", "-oProxyCommand=x",
                                   "16\nx", "a b", "'x'"])
def test_hostile_placeholder_values_are_refused(value):
    with pytest.raises(UsageError, match=r"budget = .* has characters a shell or a program could misread"):
        spec_of(configs=[{"name": "x", "budget": value, "topk": 8}])


@pytest.mark.unit
@pytest.mark.parametrize("changes, message", [
    ({"reconfigure": "ssh gpu-host bash /root/r.sh {budget}"},
     "reconfigure must be an argv list, not a shell"),
    ({"configs": [{"name": "b16", "budget": 16}]}, r"\{topk\} has no value; add topk = … to each configuration"),
    ({"configs": [{"name": "b16", "budget": 16, "top_k": 4}]}, r"sweep.toml b16 reconfigure: \{topk\} has no value; "
                                                             r"did you mean \{top_k\}\?"),
    ({"configs": [{"name": "a", "budget": 1, "topk": 1}, {"name": "a", "budget": 2, "topk": 1}]},
     "configuration names repeat"),
    ({"matrix": {"contexts": [60], "concurency": [1]}}, "unknown key.*concurency"),
    ({"matrix": {"contexts": [60], "concurrency": "1,2"}}, "concurrency = '1,2' must be a non-empty list"),
    ({"server": {"url": "http://h:1", "api": "grpc"}}, "api = 'grpc' is unknown"),
    ({"configs": []}, "no configurations"),
    ({"configs": [{"name": "../x", "budget": 1, "topk": 1}]}, "name = '../x': use letters"),
    ({"readiness": {"successes": 0}}, "successes = 0 must be a number > 0"),
    ({"reconfigure": ["r.sh", "{budget"]}, "stray '{'"),
])
def test_bad_sweep_files_are_one_line_errors(changes, message):
    with pytest.raises(UsageError, match=message) as exc:
        spec_of(**changes)
    assert "\n" not in str(exc.value)


@pytest.mark.unit
def test_cli_exit_2_with_one_line(tmp_path, cli):
    bad = tmp_path / "s.toml"
    bad.write_text('reconfigure = ["r.sh", "{budget}"]\n[server]\nurl = "http://127.0.0.1:1"\n'
                   '[matrix]\ncontexts = [60]\nconcurrency = [1]\n[[configs]]\nbudget = "1;id"\n')
    res = cli("sweep", str(bad))
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "budget = '1;id' has characters" in res.stderr
    missing = cli("sweep", str(tmp_path / "nope.toml"))
    assert missing.returncode == 2 and "no such file" in missing.stderr


# ---- the readiness gate against a small real server ------------------------------------------------------
class FakeServer:
    """/health 200 (no /health_generate), /server_info with a budget, and a chat route whose first
    `failures` generations answer 503 (a server whose health is green while generation fails)."""

    def __init__(self, budget: int, failures: int):
        self.budget, self.failures, self.generations = budget, failures, 0

    def app(self) -> web.Application:
        async def health(request):
            return web.Response()

        async def models(request):
            return web.json_response({"data": [{"id": "m"}]})

        async def info(request):
            return web.json_response({"speculative_ddtree_budget": self.budget})

        app = web.Application()
        app.router.add_get("/health", health)
        app.router.add_get("/v1/models", models)
        app.router.add_get("/server_info", info)
        app.router.add_post("/v1/chat/completions", self.chat)
        return app

    async def chat(self, request):
        self.generations += 1
        if self.generations <= self.failures:
            return web.json_response({"message": "loading"}, status=503)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"length"}],'
                         b'"usage":{"prompt_tokens":9,"completion_tokens":1}}\n\n')
        await resp.write(b'data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":1}}\n\n'
                         b"data: [DONE]\n\n")
        return resp


async def _gate(server: FakeServer, **kw):
    runner = web.AppRunner(server.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        async with aiohttp.ClientSession() as session:
            return await wait_ready(session, url, poll_s=0.02, **kw)
    finally:
        await runner.cleanup()


@pytest.mark.sim
def test_gate_needs_consecutive_real_generations():
    server = FakeServer(budget=32, failures=3)
    res = asyncio.run(_gate(server, timeout_s=10, successes=2, expect={"speculative_ddtree_budget": "32"}))
    assert res.ready and res.expect_ok and res.health_path == "/health" and res.model == "m"
    assert (res.generations_failed, res.generations_ok, server.generations) == (3, 2, 5)
    assert res.states[0][1].startswith("generation 1/2 failed (http_error: HTTP 503")


@pytest.mark.sim
def test_gate_refuses_the_wrong_server_and_an_unproven_one():
    wrong = asyncio.run(_gate(FakeServer(16, 0), timeout_s=0.3, expect={"speculative_ddtree_budget": 32}))
    assert not wrong.ready
    assert wrong.reason.startswith("not ready after 0.3 s; last state: up, but expect does not match: "
                                   "speculative_ddtree_budget: server has 16, expected 32")
    unproven = FakeServer(32, 0)
    res = asyncio.run(_gate(unproven, timeout_s=0.3))
    assert not res.ready and "not yet seen restarting" in res.reason and unproven.generations == 0
    seen = asyncio.run(_gate(FakeServer(32, 0), timeout_s=5, saw_down=True, successes=3))
    assert seen.ready and seen.generations_ok == 3


@pytest.mark.sim
def test_gate_waits_for_the_reconfiguration_to_finish():
    async def main():
        done = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.3, done.set_result, 0)
        return await _gate(FakeServer(8, 0), timeout_s=5, expect={"speculative_ddtree_budget": 8}, after=done)

    res = asyncio.run(main())
    assert res.ready and res.elapsed_s >= 0.3
    assert res.states[0][1] == "up, waiting for the reconfiguration to finish"
