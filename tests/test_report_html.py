"""`loadgen report SWEEP --html FILE` after a real sweep of three simulator configurations (one crashes
mid-matrix) and a fourth whose reconfigure command fails, opened in a real headless Chromium (tests/browser.py):
no console error, no failed or outside load, no script; every embedded plot decodes and is not blank; every
number in the page's tables equals the results files to its shown precision; the marked best of each cell is
the true best of its usable cells; failed configurations and cells are listed with their reasons.

The screenshots (first screen and full page) are kept under $LOADGEN_TEST_ARTIFACTS (default
build/test-artifacts)/report-html; the test prints the folder."""

from __future__ import annotations

import asyncio
import base64
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.results.cell_result import from_json
from loadgen.results.cell_status import measured, not_best, problem
from tests.browser import CHROMIUM, Browser

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = str(ROOT / "tests" / "fixtures" / "sim_reconfigure.py")
ARTIFACTS = Path(os.environ.get("LOADGEN_TEST_ARTIFACTS", ROOT / "build" / "test-artifacts")) / "report-html"
SPEED = 20
# the comparison's figures: results field, and whether higher is better
def _judged(cell: dict, path: str) -> float:
    """The figure the verdict judges: output tok/s is the steady window's where that covers half the window."""
    steady = cell.get("steady") or {}
    if path == "output_tok_s" and steady.get("output_tok_s") and steady["duration_s"] >= 0.5 * cell["duration_s"]:
        return steady["output_tok_s"]
    return field(cell, path)


def _interval(cell: dict, path: str, s_run: float) -> tuple[float, float]:
    """The figure's 95 % interval as the verdict takes it, written out again: its own (output tok/s: its interval
    scaled to the steady figure; J/token: output tok/s's relative interval, inverted; none: exact), widened on the
    log scale by the noise between runs `s_run`."""
    v, own = _judged(cell, path), (cell.get("intervals") or {}).get(path)
    out, iv = cell["output_tok_s"], (cell.get("intervals") or {}).get("output_tok_s")
    if path == "output_tok_s" and iv:
        own = [v * iv[0] / out, v * iv[1] / out]
    if path == "power.j_per_output_token":
        own = None if iv is None else [v * out / iv[1], v * out / iv[0]]
    low, high = own or (v, v)
    s = math.hypot((math.log(high) - math.log(low)) / 3.92, s_run)
    return v * math.exp(-1.96 * s), v * math.exp(1.96 * s)


def _true_best(group: list, path: str, higher: bool, s_run: float) -> set:
    """The configuration best at `path` in one cell by the verdict's rule: among the measured cells that may be
    best (checks passed, not cut short), the leader's margin over every other has a 95 % interval above 0
    (log ratio ± 1.96·√(s_a² + s_b²)) and is ≥ 2 %; no margin is taken against a cell that may not be best."""
    allowed = {name: cell for name, _, cell in group
               if measured(from_json(cell)) and not_best(from_json(cell)) is None and (_judged(cell, path) or 0) > 0}
    if len(allowed) < 2:
        return set()
    ranked = sorted(allowed, key=lambda n: _judged(allowed[n], path), reverse=higher)
    lead = ranked[0]
    for other in ranked[1:]:
        (la, ha), (lo, ho) = _interval(allowed[lead], path, s_run), _interval(allowed[other], path, s_run)
        d = math.log(_judged(allowed[lead], path) / _judged(allowed[other], path)) * (1 if higher else -1)
        se = math.hypot(math.log(ha / la), math.log(ho / lo)) / 3.92
        if d - 1.96 * se <= 0 or math.expm1(d) < 0.02:
            return set()
    return {lead}


def _between_runs(docs: dict, key: str) -> float:
    """s_run of the sweep's drift controls for `key` (output_tok_s, ttft_p50_s): √(Σ ln(first/again)² / 2n)."""
    logs = [math.log(d["drift"]["first"][key] / d["drift"]["again"][key]) for d in docs.values()
            if (d.get("drift") or {}).get("first") and (d["drift"].get("again") or {}).get(key)]
    return math.sqrt(sum(x * x for x in logs) / (2 * len(logs))) if logs else 0.0


FIELDS = {"out_tok_s": ("output_tok_s", True), "req_tok_s": ("request_tok_s.mean", True),
          "ttft_p50_s": ("ttft_s.p50", False), "accept": ("accept_length.value", True),
          "power_w": ("power.mean_w_total", False), "j_per_token": ("power.j_per_output_token", False)}

# the matrix's columns as a reader sees them: header → results field (the page's own labels are checked
# against this, so a column cannot show one figure under another's name)
MATRIX_HEADERS = {"out tok/s": "output_tok_s", "steady out tok/s": "steady.output_tok_s", "req tok/s mean": "request_tok_s.mean",
                  "req tok/s p10": "request_tok_s.p10", "TTFT p50 ms": "ttft_s.p50", "TTFT p99 ms": "ttft_s.p99",
                  "accept": "accept_length.value", "J/tok": "power.j_per_output_token"}
COMPARISON_HEADER_WORDS = {"out_tok_s": "out", "req_tok_s": "req", "ttft_p50_s": "TTFT", "accept": "accept",
                           "power_w": "W", "j_per_token": "J/tok", "out_tok_s_x": "vs base",
                           "req_tok_s_x": "vs base"}

pytestmark = [pytest.mark.infra, pytest.mark.untimed, pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (scripts/test-deps.sh installs "
                                "Debian's chromium)")]


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sweep_file(tmp: Path) -> Path:
    port, dcgm = free_port(), free_port()
    text = f"""
name = "ddtree-budget"
reconfigure = ["{sys.executable}", "{FIXTURE}", "{tmp / 'state'}", "{port}", "--exit", "{{exit}}", "--",
               "--budget", "{{budget}}",
               "--topk", "{{topk}}", "--crash-after", "{{crash}}", "--speed", "{SPEED}", "--dcgm-port", "{dcgm}",
               "--gpus", "2"]
diagnostics = ["{sys.executable}", "{FIXTURE}", "{tmp / 'state'}", "{port}", "--diagnose"]
[server]
url = "http://127.0.0.1:{port}"
[readiness]
timeout_s = 30
poll_s = 0.05
successes = 2
[expect]
speculative_ddtree_budget = "{{budget}}"
[matrix]
contexts = [60, 256]
concurrency = [1, 2, 4]
max_tokens = 32
requests_per_cell = 8
[telemetry]
dcgm = "http://127.0.0.1:{dcgm}/metrics"
interval_s = 0.2
"""
    # b32 serves its 2 readiness probes and the 24 requests of the 60-token cells, then dies in the next cell;
    # b64's reconfigure command fails: a configuration that measured nothing
    for name, budget, crash, exit_status in (("b8", 8, 0, 0), ("b16", 16, 0, 0), ("b32", 32, 30, 0),
                                             ("b64", 64, 0, 3)):
        text += (f'[[configs]]\nname = "{name}"\nbudget = {budget}\ntopk = 4\ncrash = {crash}\n'
                 f'exit = {exit_status}\n')
    path = tmp / "sweep.toml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    out = tmp / "results"
    sweep = subprocess.run([sys.executable, "-m", "loadgen", "sweep", str(sweep_file(tmp)), "--out-dir", str(out)],
                           check=False, capture_output=True, text=True, timeout=180, cwd=ROOT)
    try:
        assert sweep.returncode == 1, sweep.stderr[-3000:]  # b32 is partial
        statuses = [c["status"] for c in json.loads((out / "sweep.json").read_text())["configs"]]
        assert statuses == ["ok", "ok", "partial", "failed"], sweep.stdout[-3000:]
    finally:
        pid = tmp / "state" / "sim.pid"
        if pid.exists():
            subprocess.run(["kill", pid.read_text().strip()], check=False)
    html = tmp / "report.html"
    rep = subprocess.run([sys.executable, "-m", "loadgen", "report", str(out), "--html", str(html), "--plots",
                          str(tmp / "plots")], check=False, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert rep.returncode == 0, rep.stderr
    return tmp, out, html, rep.stdout


def results(out: Path) -> dict[str, dict]:
    summary = json.loads((out / "sweep.json").read_text())
    return {c["name"]: json.loads((out / c["results"]).read_text()) for c in summary["configs"]}


def field(cell: dict, path: str):
    node = cell
    for key in path.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node


def shown_equals(value, text: str, scale: float) -> bool:
    """The page's text is the value rounded to as many decimals as the text shows ("-" for no value)."""
    if value is None:
        return text == "-"
    decimals = len(text.split(".")[1]) if "." in text else 0
    return text == f"{value * scale:.{decimals}f}"


def cell_of(docs: dict, config: str, data: dict) -> dict:
    rate = float(data.get("rate") or 0)
    for c in docs[config]["cells"]:
        if (c["context_tokens"], c["concurrency"], c.get("request_rate") or 0.0) == \
                (int(data["ctx"]), int(data["concurrency"]), rate):
            return c
    raise AssertionError(f"{config} has no cell {data}")


READ_PAGE = """(() => {
  const imgs = [...document.images].map(img => {
    let colours = 0;
    if (img.naturalWidth) {
      const c = document.createElement('canvas'); c.width = img.naturalWidth; c.height = img.naturalHeight;
      const x = c.getContext('2d'); x.drawImage(img, 0, 0);
      const d = x.getImageData(0, 0, c.width, c.height).data; const seen = new Set();
      for (let k = 0; k < d.length; k += 4 * 7) seen.add((d[k] << 16) | (d[k + 1] << 8) | d[k + 2]);
      colours = seen.size;
    }
    return {alt: img.alt, complete: img.complete, w: img.naturalWidth, h: img.naturalHeight, colours};
  });
  const tables = [...document.querySelectorAll('table[data-table]')].map(t => ({
    kind: t.dataset.table, config: t.dataset.config || null,
    rows: [...t.tBodies[0].rows].filter(r => !r.classList.contains('note-row')).map(r => ({
      data: {...r.dataset}, classes: r.className,
      cells: [...r.cells].filter(td => td.dataset.metric).map(td => ({metric: td.dataset.metric,
        header: t.tHead.rows[0].cells[td.cellIndex].textContent.trim(),
        scale: Number(td.dataset.scale || 1), text: td.textContent.trim(), best: td.classList.contains('best')}))
    }))}));
  const outside = [...document.querySelectorAll('[src], [href]')].map(e => e.getAttribute('src') ||
    e.getAttribute('href')).filter(u => !u.startsWith('data:') && !u.startsWith('#'));
  return {imgs, tables, outside, scripts: document.scripts.length, links: document.querySelectorAll('link').length,
          banner: (document.querySelector('.banner.sim') || {}).textContent || '',
          problems: [...document.querySelectorAll('#problems li')].map(li => li.textContent)};
})()"""


async def read_page(html: Path, profile: Path, shots: str = "") -> tuple[dict, list[str], list[str]]:
    """The page's contents, its problems, and the problems of a deliberately broken page (the harness's check
    of itself: a missing image and a console error must be seen). Screenshots `<shots>first-screen.png` and
    `<shots>full-page.png` go to ARTIFACTS."""
    async with Browser(profile) as browser:
        page = await browser.page()
        await page.open(html.as_uri(), 1400, 900)
        await asyncio.sleep(0.5)  # late console messages or loads would land here
        content = await page.evaluate(READ_PAGE)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        await page.screenshot(ARTIFACTS / f"{shots}first-screen.png", full_page=False)
        await page.screenshot(ARTIFACTS / f"{shots}full-page.png", full_page=True)
        broken_html = html.parent / "broken.html"
        broken_html.write_text('<img src="missing.png"><script>console.error("boom")</script>')
        broken = await browser.page()
        await broken.open(broken_html.as_uri(), 800, 600)
        await asyncio.sleep(0.5)
        return content, page.problems, broken.problems


def check_comparison(table: dict, docs: dict, base: str) -> dict[tuple, set[str]]:
    """Check every row; returns the true best configurations of each (cell, figure)."""
    groups: dict[tuple, list[tuple[str, dict, dict]]] = {}
    for row in table["rows"]:
        cell = cell_of(docs, row["data"]["config"], row["data"])
        key = (row["data"]["ctx"], row["data"]["concurrency"], row["data"].get("rate"))
        groups.setdefault(key, []).append((row["data"]["config"], row, cell))
        tds = {td["metric"]: td for td in row["cells"]}
        assert set(tds) == set(FIELDS) | {"out_tok_s_x", "req_tok_s_x"}
        assert all(COMPARISON_HEADER_WORDS[m] in td["header"] for m, td in tds.items()), tds
        shown = measured(from_json(cell))  # a cell that failed a check keeps its figures
        assert (row["data"]["measured"] == "yes") == shown
        for m, (path, _) in FIELDS.items():
            value = field(cell, path) if shown else None
            assert shown_equals(value, tds[m]["text"], tds[m]["scale"]), (row["data"], m, value, tds[m])
        base_cell = cell_of(docs, base, row["data"])
        for m in ("out_tok_s", "req_tok_s"):
            v, b = field(cell, FIELDS[m][0]), field(base_cell, FIELDS[m][0])
            # a ratio needs both figures: a cell whose every answer came in one read has no decode rate (a busy
            # client: request_tok_s is None without a span from the first to the last token)
            ok = shown and measured(from_json(base_cell)) and b and v is not None
            assert tds[m + "_x"]["text"] == (f"{v / b:.2f}x" if ok else "-"), (row["data"], m)
    assert sum(1 for g in groups.values() for _ in g) == sum(len(d["cells"]) for d in docs.values())
    true_best = {}
    for key, group in groups.items():
        for m, (path, higher) in FIELDS.items():
            drift = {"ttft_p50_s": "ttft_p50_s", "accept": None, "power_w": None}.get(m, "output_tok_s")
            best = _true_best(group, path, higher, _between_runs(docs, drift) if drift else 0.0) \
                if m != "accept" else set()  # accept length is shown, never ranked (a larger draft lengthens it)
            marked = {name for name, row, _ in group for td in row["cells"] if td["metric"] == m and td["best"]}
            assert marked == best, (key, m, best)
            true_best[(*key, m)] = best
    return true_best


def check_verdict(table: dict, compared: dict, true_best: dict) -> None:
    """Each load's answer on the page is `loadgen compare --format json`'s verdict, and its output tok/s,
    per-request tok/s and TTFT winners are the comparison's true best (one rule)."""
    assert table["rows"]
    by = {(v["context"], v["concurrency"], v["objective"]): v for v in compared["verdict"]}
    metric = {"output_tok_s": "out_tok_s", "request_tok_s": "req_tok_s", "ttft_p50_s": "ttft_p50_s"}
    for row in table["rows"]:
        for td in row["cells"]:
            v = by[(int(row["data"]["ctx"]), int(row["data"]["concurrency"]), td["metric"])]
            if v["decision"] == "wins":
                assert td["text"].startswith(v["winner"]) and f"over {v['runner_up']}" in td["text"], (v, td)
            elif v["decision"] == "tied":
                assert td["text"].startswith("tied: " + ", ".join(v["tied"])), (v, td)
            if td["metric"] in metric:
                key = (row["data"]["ctx"], row["data"]["concurrency"], row["data"].get("rate"), metric[td["metric"]])
                assert ({v["winner"]} if v["decision"] == "wins" else set()) == true_best[key], (key, v, td)


def check_matrix(table: dict, docs: dict) -> None:
    config = table["config"]
    assert len(table["rows"]) == len(docs[config]["cells"])
    for row in table["rows"]:
        cell = cell_of(docs, config, row["data"])
        assert set(MATRIX_HEADERS) <= {td["header"] for td in row["cells"]}
        assert all(MATRIX_HEADERS.get(td["header"], td["metric"]) == td["metric"] for td in row["cells"]), row
        assert all(td["scale"] == (1000 if td["header"].endswith(" ms") else 1) for td in row["cells"]), row
        for td in row["cells"]:
            value = field(cell, td["metric"])
            assert isinstance(value, (int, float)) or value is None, td
            assert shown_equals(value, td["text"], td["scale"]), (config, row["data"], td, value)


def test_report_page_in_a_real_browser(report, tmp_path):
    tmp, out, html, stdout = report
    docs = results(out)
    assert stdout.lstrip().startswith("ctx") and "page: " + str(html) in stdout  # the table comes first
    text = html.read_text()
    pngs = {p.name: p.read_bytes() for p in (tmp / "plots").iterdir()}
    assert {"output_tok_s.png", "request_tok_s.png", "ttft.png", "accept_length.png", "power.png"} <= set(pngs)
    embedded = [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([^"]+)"', text)]
    assert sorted(embedded) == sorted(pngs.values())  # the page embeds exactly the PNG files' bytes

    content, problems, broken = asyncio.run(read_page(html, tmp_path / "profile"))
    print(f"\nreport screenshots: {ARTIFACTS}")
    assert problems == []
    assert any("failed load" in p for p in broken) and any("boom" in p for p in broken), broken
    assert content["scripts"] == 0 and content["links"] == 0 and content["outside"] == []
    check_images(content, len(pngs))
    assert f"SIMULATED, speed ×{SPEED}" in content["banner"]

    kinds = [t["kind"] for t in content["tables"]]
    assert kinds.count("comparison") == 1 and kinds.count("matrix") == 3
    true_best = check_comparison(next(t for t in content["tables"] if t["kind"] == "comparison"), docs, "b8")
    compared = json.loads(subprocess.run([sys.executable, "-m", "loadgen", "compare", str(out), "--format", "json"],
                                         check=True, capture_output=True, text=True, cwd=ROOT).stdout)
    check_verdict(next(t for t in content["tables"] if t["kind"] == "verdict"), compared, true_best)
    for table in content["tables"]:
        if table["kind"] == "matrix":
            check_matrix(table, docs)
    failed = [c for c in docs["b32"]["cells"] if problem(from_json(c))]
    assert len(failed) == 3 and len(content["problems"]) == 4 and docs["b64"]["cells"] == []
    assert content["problems"][0].startswith("b64: failed — reconfigure failed: ")
    assert "diagnose: newest server log" in content["problems"][0]  # its diagnostics output
    assert all(problem(from_json(c)) in li for c, li in zip(failed, content["problems"][1:]))
    assert (ARTIFACTS / "full-page.png").stat().st_size > 50_000


def check_images(content: dict, count: int) -> None:
    assert len(content["imgs"]) == count
    for img in content["imgs"]:
        assert img["complete"] and img["w"] > 300 and img["h"] > 200, img
        assert img["colours"] > 16, img  # drawn, not one flat colour


def test_dataset_and_open_loop_runs_in_a_real_browser(tmp_path):
    """A --dataset run with categories and an open-loop run, side by side (--allow-mismatch): the categories'
    numbers read back equal the results, open-loop cells are plotted and tabled, the mismatch is shown."""
    rows = tmp_path / "rows.jsonl"
    kinds = {"code": "def area(r):\n    return 3.14159 * r * r\n# explain", "chat": "Tell me about the sea."}
    rows.write_text("".join(json.dumps({"prompt": f"{text} ({i})", "category": kind, "max_tokens": 24}) + "\n"
                            for i in range(12) for kind, text in kinds.items()))
    runs = [("cat", ["--dataset", str(rows), "--concurrency", "1,2", "--requests-per-cell", "12"]),
            ("open", ["--request-rate", "20,40", "--contexts", "60", "--requests-per-cell", "12",
                      "--max-tokens", "24"])]
    for name, args in runs:
        res = subprocess.run([sys.executable, "-m", "loadgen", *args, "--out", str(tmp_path / f"{name}.json")],
                             check=False, capture_output=True, text=True, timeout=180, cwd=ROOT)
        assert res.returncode == 0, res.stderr[-3000:]
    html = tmp_path / "r.html"
    rep = subprocess.run([sys.executable, "-m", "loadgen", "report", str(tmp_path / "cat.json"),
                          str(tmp_path / "open.json"), "--allow-mismatch", "--html", str(html)],
                         check=False, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert rep.returncode == 0, rep.stderr
    docs = {n: json.loads((tmp_path / f"{n}.json").read_text()) for n, _ in runs}

    content, problems, _ = asyncio.run(read_page(html, tmp_path / "profile", shots="dataset-"))
    assert problems == []
    assert content["scripts"] == 0 and content["outside"] == []
    check_images(content, len(re.findall(r'src="data:image/png;base64,', html.read_text())))
    assert {"accept_categories", "open_loop"} <= set(re.findall(r'<figure id="([a-z_]+)"', html.read_text()))
    tables = {t["kind"]: t for t in content["tables"]}
    cats = tables["categories"]["rows"]
    assert {r["data"]["category"] for r in cats} == {"code", "chat"} and len(cats) == 4
    for row in cats:
        fig = cell_of(docs, row["data"]["config"], row["data"])["by_category"][row["data"]["category"]]
        for td in row["cells"]:
            assert shown_equals(field(fig, td["metric"]), td["text"], td["scale"]), (row["data"], td)
    assert len(tables["open-loop"]["rows"]) == 2
    assert "max tokens" in html.read_text() and "measured different things" in html.read_text()
