"""`--ray` on a real local Ray cluster of three nodes (`ray.cluster_utils.Cluster`: each node its own raylet),
every node bound to 127.0.0.1, against tests/reference_server.py (not loadgen's simulator) and its own truth
(`--events`: one line per request it served).

One cluster for the file (its start is the slow part), small nodes (one CPU, a small object store) so it fits a
2-core machine. The node-loss test runs last: it removes a node of the shared cluster.
"""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
import time

import pytest

from loadgen.files import read_json, read_jsonl
from tests.conftest import ROOT, run_loadgen
from tests.reference_server import running
from tests.test_search_reference import SEARCH, SERVER

pytestmark = pytest.mark.infra

cluster_utils = pytest.importorskip("ray.cluster_utils", reason="Ray is not installed: pip install 'loadgen[ray]'")
NODE = {"num_cpus": 1, "node_ip_address": "127.0.0.1", "object_store_memory": 78 * 2**20}


@pytest.fixture(scope="module")
def cluster():
    c = cluster_utils.Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    for _ in range(2):
        c.add_node(**NODE)
    c.wait_for_nodes()
    yield c
    c.shutdown()


def served(events) -> list[dict]:
    return [e for e in read_jsonl(str(events)) if e["event"] == "request"]


def test_three_parts_one_per_node_send_what_the_server_served(cluster, tmp_path):
    events = tmp_path / "events.jsonl"
    with running(tmp_path, "--slots", "128", "--events", str(events)) as url:
        proc = run_loadgen("--url", url, "--ray", cluster.address, "--workers", "3", "--concurrency", "96",
                           "--contexts", "60", "--max-tokens", "16", "--requests-per-cell", "192", "--warmup", "0",
                           "--out", str(tmp_path / "r.json"), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = read_json(str(tmp_path / "r.json"))
    parts = doc["ray"]["parts"]
    assert len({p["node_id"] for p in parts}) == 3 == len(parts) and doc["ray"]["placement"] == "STRICT_SPREAD"
    assert [len(c["parts"]) for c in doc["ray"]["cells"]] == [3]
    assert sorted(doc["ray"]["clock"]) == sorted(p["node_id"] for p in parts)
    records = read_jsonl(str(tmp_path / "r.requests.jsonl"))
    assert {r["worker"] for r in records} == {1, 2, 3}
    # the server's own truth over the load (before it: loadgen's sizing requests, not records)
    # t_sent is taken once the request is handed to the socket: on loopback the server may read it a little
    # before that, and the part's clock mapping adds its ± (tens of µs; milliseconds on a busy machine, where a
    # 2 ms margin once left a request out); the sizing requests ended seconds before (the parts' start)
    first_sent = min(r["t_sent_ns"] for r in records) - 500_000_000
    truth = [e for e in served(events) if e["received_ns"] >= first_sent]
    cell = doc["cells"][0]
    assert cell["requests"]["ok"] == len(records) == len(truth) == 192
    assert sum(r["completion_tokens"] for r in records) == sum(e["tokens"] for e in truth)
    # records are on the driver's time base: every request was sent before the server received it and ended after
    assert max(e["end_ns"] for e in truth) <= max(r["t_end_ns"] for r in records) + 5_000_000
    assert all(len(line) <= 120 for line in proc.stdout.splitlines())


def test_a_search_over_two_ray_parts_gives_the_one_host_answer(cluster, tmp_path):
    def search(url: str, name: str, *extra: str):
        return run_loadgen("search", "--url", url, *SEARCH, *extra, "--out", str(tmp_path / name), timeout=240)

    with (running(tmp_path, *SERVER) as one_url, running(tmp_path, *SERVER) as ray_url,
          concurrent.futures.ThreadPoolExecutor(2) as pool):
        one = pool.submit(search, one_url, "one.json")
        ray = pool.submit(search, ray_url, "ray.json", "--ray", cluster.address, "--workers", "2")
        one, ray = one.result(), ray.result()
    assert one.returncode == 0 and ray.returncode == 0, (one.stderr[-2000:], ray.stderr[-2000:])
    answers = [read_json(str(tmp_path / name))["search"]["answers"]["60"] for name in ("one.json", "ray.json")]
    assert [(a["met"], a["missed"]) for a in answers] == [(4, 5), (4, 5)], answers
    doc = read_json(str(tmp_path / "ray.json"))
    assert len(doc["ray"]["parts"]) == 2 and len(doc["ray"]["cells"]) == len(doc["cells"])


def test_a_node_lost_mid_cell_accounts_for_every_request_and_the_next_cell_runs_on_the_rest(cluster, tmp_path):
    out = tmp_path / "lost.json"
    jsonl = tmp_path / "lost.requests.jsonl"
    with running(tmp_path, "--slots", "64", "--step-ms", "20") as url:
        proc = subprocess.Popen(
            [sys.executable, "-m", "loadgen", "--url", url, "--ray", cluster.address, "--workers", "3",
             "--concurrency", "24,36", "--contexts", "60", "--max-tokens", "32", "--requests-per-cell", "240",
             "--warmup", "0", "--out", str(out)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and (not jsonl.exists() or len(jsonl.read_text().splitlines()) < 40):
            time.sleep(0.2)
        victim = cluster.list_all_nodes()[-1]  # a node other than the head, which holds a part
        cluster.remove_node(victim, allow_graceful=False)
        stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1 and out.exists(), stderr[-3000:]
    doc = read_json(str(out))
    first, second = doc["cells"]
    lost = [i for i in first["incidents"] if i["kind"] == "worker_lost"]
    assert len(lost) == 1 and victim.node_id[:12] in lost[0]["reason"], first["incidents"]
    req = first["requests"]
    assert req["ok"] + req["failed"] + req["cancelled"] + first["requests_not_sent"] == 240, first
    assert req["cancelled"] > 0, req  # the lost part's requests in flight
    assert first["status"] == "failed"  # its failed requests are beyond --max-failed-fraction
    records = [r for r in read_jsonl(str(jsonl)) if r["cell"]["concurrency"] == 24]
    assert len(records) == req["ok"] + req["failed"] + req["cancelled"]  # every request sent has its record
    assert all(victim.node_id[:12] in r["error"] for r in records if r["outcome"] != "ok")
    assert second["status"] == "ok" and second["requests"]["ok"] == 240
    assert [len(c["parts"]) for c in doc["ray"]["cells"]] == [3, 2]
    assert victim.node_id not in {p["node_id"] for p in doc["ray"]["cells"][1]["parts"]}
