"""Replaying a dataset (`--dataset`): each format parsed from a file written here, the requests the simulator
received equal the rows (its truth logs every prompt and max_tokens), per-category figures equal the truth's,
and every unusable row or file is named before any load."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from loadgen.files import read_json, read_jsonl
from loadgen.sim import tokenizer
from loadgen.sim.prompt_kind import prompt_kind
from loadgen.workload.dataset_formats import parse_rows
from tests.cells import typed
from tests.conftest import run_loadgen, said

pytestmark = pytest.mark.untimed  # its tests of other tiers than unit time nothing against the machine

CODE = ["def area(r):\n    return 3.14159 * r ** 2  # {}\n", "for i in range(10):\n    if i % 2 == 0:\n        "
        "print(i, [x * x for x in range(i)])\n", "class Stack:\n    def __init__(self):\n        self.items = []\n"
        "    def push(self, x):\n        self.items.append(x)\n"]
PROSE = ["Tell me a short story about a lighthouse keeper and her quiet life by the sea.",
         "Translate into French: the weather is lovely today and we are going to the park.",
         "Summarise why people enjoy walking in the mountains in autumn, in two sentences."]


def chat_rows() -> list[dict]:
    rows = []
    for i, text in enumerate(CODE):
        rows.append({"messages": [{"role": "system", "content": "You review Python code."},
                                  {"role": "user", "content": text}], "max_tokens": 40 + i, "category": "code"})
    for i, text in enumerate(PROSE):
        rows.append({"messages": [{"role": "user", "content": text}], "output_len": 50 + i, "category": "chat"})
    return rows


def sharegpt_rows() -> list[dict]:
    return [{"id": f"s{i}", "conversations": [{"from": "human", "value": q}, {"from": "gpt", "value": a * (i + 1)}]}
            for i, (q, a) in enumerate([("What is a lighthouse?", "A tower with a light that guides ships. "),
                                        ("Name a warm colour.", "Orange is warm, and so is red. "),
                                        ("Why is the sky blue?", "Air scatters blue light more than red. ")])]


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def first_line_removed(text: str) -> str:
    """A prompt without the unique first line loadgen puts before it (`--prefix-cache unique`)."""
    assert "\n" in text
    return text.split("\n", 1)[1]


# ---- formats ---------------------------------------------------------------------------------------------
@pytest.mark.unit
def test_each_format_is_detected_and_parsed(tmp_path):
    fmt, rows, bad = parse_rows("".join(json.dumps(r) + "\n" for r in chat_rows()), "category")
    assert (fmt, bad) == ("openai-chat", [])
    assert [r.messages for r in rows] == [r["messages"] for r in chat_rows()]
    assert [r.max_tokens for r in rows] == [40, 41, 42, 50, 51, 52]
    assert [r.category for r in rows] == ["code"] * 3 + ["chat"] * 3

    as_list = json.dumps(sharegpt_rows(), indent=2)
    for text in (as_list, "".join(json.dumps(r) + "\n" for r in sharegpt_rows())):
        fmt, rows, bad = parse_rows(text, "category")
        assert (fmt, bad) == ("sharegpt", [])
        assert [r.messages for r in rows] == [[{"role": "user", "content": s["conversations"][0]["value"]}]
                                              for s in sharegpt_rows()]
        assert [r.reference for r in rows] == [s["conversations"][1]["value"] for s in sharegpt_rows()]
    fmt, rows, bad = parse_rows(as_list, "category")
    starts = [i for i, line in enumerate(as_list.splitlines(), 1) if line == "  {"]  # each item's opening brace
    assert [r.line for r in rows] == starts and len(starts) == 3

    text = '{"prompt": "one", "kind": "a"}\n{"text": "two", "max_tokens": 5, "kind": "b"}\n'
    fmt, rows, bad = parse_rows(text, "kind")
    assert (fmt, [(r.prompt, r.max_tokens, r.category) for r in rows]) == ("prompt", [("one", None, "a"),
                                                                                    ("two", 5, "b")])


@pytest.mark.unit
def test_bad_rows_are_named_with_their_line():
    text = ('{"prompt": "fine"}\n{"prompt": "broken"\n\n{"answer": 1}\n{"prompt": "   "}\n[1, 2]\n'
            '{"prompt": "x", "max_tokens": 0}\n{"messages": [{"role": "user", "content": "a chat row"}]}\n')
    fmt, rows, bad = parse_rows(text, "category")
    assert fmt == "prompt" and [r.line for r in rows] == [1]
    assert [(b.line, b.reason.split(" (")[0]) for b in bad] == [
        (2, "invalid JSON"), (4, "no prompt field"), (5, "empty prompt"), (6, "not a JSON object"),
        (7, "max_tokens/output_len 0 must be a positive integer"), (8, "an OpenAI chat row in a prompt file")]


@pytest.mark.unit
def test_the_simulator_judges_code_and_prose():
    assert {prompt_kind(t) for t in CODE} == {"code"}
    assert {prompt_kind(t) for t in PROSE} == {"prose"}


# ---- bad input ends the run before any load ----------------------------------------------------------------
@pytest.mark.sim
def test_bad_rows_stop_the_run_unless_tolerated(sim_factory, tmp_path):
    sim = sim_factory("--speed", "20")
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "Hello there, how are you?"}\n{"prompt": oops}\n{"title": "no prompt"}\n')
    proc = run_loadgen("--url", sim.url, "--dataset", str(path), "--concurrency", "1", "--out", str(tmp_path / "r.json"))
    assert proc.returncode == 2, proc.stderr
    assert f"{path}:2: invalid JSON" in said(proc.stderr)
    assert f"{path}:3: no prompt field (expected messages, conversations, or prompt/text)" in said(proc.stderr)
    assert "2 unusable rows (named above), more than --max-bad-rows 0" in said(proc.stderr.splitlines()[-1])
    assert sim.truth_rows() == []
    proc, doc, records, truth = run_dataset(sim, path, tmp_path / "t.json", "--max-bad-rows", "2", "--concurrency",
                                            "1", "--api", "openai-completions", "--max-tokens", "4")
    assert [(first_line_removed(t["prompt"]), t["max_tokens"]) for t in truth] == [("Hello there, how are you?", 4)]
    assert doc["prompt_sizing"]["bad_rows"] == 2
    assert "prompt rows are sent" not in proc.stderr  # completions take the prompt as it is


@pytest.mark.unit
@pytest.mark.parametrize("flag", ["--dataset", "--prompts"])
def test_a_file_that_is_not_text_is_refused(tmp_path, flag, cli):
    png = tmp_path / "image.jsonl"
    png.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    proc = cli(flag, str(png), "--concurrency", "1", "--out", str(tmp_path / "r.json"))
    assert proc.returncode == 2
    assert f"{flag} {png}: not a text file" in proc.stderr
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"prompt": "ok"}\n{"prompt": "caf\xe9"}\n')
    proc = cli(flag, str(latin), "--concurrency", "1", "--out", str(tmp_path / "r.json"))
    assert proc.returncode == 2
    assert f"{flag} {latin}: not UTF-8 text (byte 0xe9 on line 2); convert it to UTF-8" in proc.stderr


@pytest.mark.sim
def test_prompts_names_its_bad_rows(sim_factory, tmp_path):
    sim = sim_factory("--speed", "20")
    path = tmp_path / "p.jsonl"
    path.write_text('{"text": "def add(a, b):\\n    return a + b\\n"}\n{"text": "cut\n')
    proc = run_loadgen("--url", sim.url, "--prompts", str(path), "--concurrency", "1", "--contexts", "60",
                       "--out", str(tmp_path / "r.json"))
    assert proc.returncode == 2
    assert f"{path}:2: invalid JSON" in proc.stderr
    assert sim.truth_rows() == []


@pytest.mark.sim
def test_chat_rows_need_the_chat_api(tmp_path, cli):
    # the check comes after the built-in simulator has started (no --url)
    path = write_jsonl(tmp_path / "chat.jsonl", chat_rows())
    proc = cli("--dataset", str(path), "--api", "openai-completions", "--concurrency", "1",
                       "--out", str(tmp_path / "r.json"))
    assert proc.returncode == 2
    assert "use --api openai-chat (not openai-completions)" in proc.stderr


# ---- replay against the truth ------------------------------------------------------------------------------
def run_dataset(sim, path: Path, out: Path, *args: str):
    proc = run_loadgen("--url", sim.url, "--dataset", str(path), "--out", str(out), *args)
    assert proc.returncode == 0, proc.stderr
    records = read_jsonl(str(out)[:-5] + ".requests.jsonl")
    truth = {t["rid"]: t for t in sim.truth_rows()}
    return proc, read_json(str(out)), records, [truth[r["request_id"]] for r in records]


@pytest.mark.sim
def test_chat_rows_replay_as_they_are(sim_factory, tmp_path):
    sim = sim_factory("--speed", "20")
    rows = chat_rows()
    path = write_jsonl(tmp_path / "chat.jsonl", rows)
    proc, doc, records, truth = run_dataset(sim, path, tmp_path / "r.json", "--concurrency", "2",
                                            "--prefix-cache", "allow")
    assert "OpenAI chat JSONL (messages), 6 rows usable (no bad rows), 6 with their own output length" in said(proc.stderr)
    assert len(records) == 6  # every row once by default
    received = sorted((json.dumps(t["prompt"]), t["max_tokens"]) for t in truth)
    sent = sorted((json.dumps(r["messages"]), r.get("max_tokens") or r.get("output_len")) for r in rows)
    assert received == sent
    assert doc["prompt_sizing"]["prefix_cache"] == "allow"
    assert doc["prompt_sizing"]["ignore_eos"] == "rows that give a length"
    lo, hi = min(t for _, t in sent), max(t for _, t in sent)
    assert doc["prompt_sizing"]["row_max_tokens"] == {"rows": 6, "min": lo, "max": hi}
    assert [line.split()[0] for line in proc.stdout.splitlines() if line.split()[1:2] == ["2"]][0] == "data"
    # the default: each request starts with its own line, the rows otherwise unchanged; sampled rows repeat
    proc, doc, records, truth = run_dataset(sim, path, tmp_path / "u.json", "--concurrency", "2",
                                            "--requests-per-cell", "12")
    assert len(records) == 12 and len({t["prompt"][0]["content"] for t in truth}) == 12
    for t in truth:
        msgs = [dict(m) for m in t["prompt"]]
        msgs[0]["content"] = first_line_removed(msgs[0]["content"])
        assert {"messages": msgs, "max_tokens": t["max_tokens"]} in \
            [{"messages": r["messages"], "max_tokens": r.get("max_tokens") or r.get("output_len")} for r in rows]


@pytest.mark.sim
def test_sharegpt_replays_with_its_own_lengths(sim_factory, tmp_path):
    sim = sim_factory("--speed", "20")
    path = tmp_path / "share.json"
    path.write_text(json.dumps(sharegpt_rows()))
    proc, doc, records, truth = run_dataset(sim, path, tmp_path / "r.json", "--concurrency", "1",
                                            "--prefix-cache", "allow")
    assert "ShareGPT (conversations), 3 rows" in " ".join(proc.stderr.split())  # the line wraps at 120 columns
    expected = {s["conversations"][0]["value"]: tokenizer.count(s["conversations"][1]["value"])
                for s in sharegpt_rows()}
    assert {t["prompt"][0]["content"]: t["max_tokens"] for t in truth} == expected
    assert sorted(r["completion_tokens"] for r in records) == sorted(expected.values())
    (cell,) = doc["cells"]
    lengths = sorted(expected.values())
    assert cell["lengths"]["output_tokens"]["mean"] == pytest.approx(sum(lengths) / 3)
    assert cell["lengths"]["output_tokens"]["p50"] == lengths[1]
    assert cell["lengths"]["prompt_tokens"]["mean"] == pytest.approx(sum(t["prompt_tokens"] for t in truth) / 3)


@pytest.mark.sim
def test_per_category_figures_match_the_truth(sim_factory, tmp_path):
    sim = sim_factory("--speed", "10")
    path = write_jsonl(tmp_path / "chat.jsonl", chat_rows())
    proc, doc, records, truth = run_dataset(sim, path, tmp_path / "r.json", "--concurrency", "1,4",
                                            "--requests-per-cell", "60")
    assert "per category:" in proc.stdout
    by_cell = defaultdict(lambda: defaultdict(list))
    for r, t in zip(records, truth):
        by_cell[r["cell"]["concurrency"]][r["category"]].append((r, t))
    for cell in doc["cells"]:
        cats = cell["by_category"]
        assert sorted(cats) == ["chat", "code"]
        for name, pairs in by_cell[cell["concurrency"]].items():
            rows = [t for _, t in pairs]
            assert {t["prompt_kind"] for t in rows} == {"code" if name == "code" else "prose"}
            true_accept = sum(t["completion_tokens"] for t in rows) / sum(t["verify_ct"] for t in rows)
            assert cats[name]["accept_length"] == {"value": pytest.approx(true_accept, rel=1e-9),
                                                   "source": "per_request"}
            assert cats[name]["requests"] == {"ok": len(pairs), "failed": 0}
            assert cats[name]["output_tokens"] == sum(t["completion_tokens"] for t in rows)
        assert cats["code"]["accept_length"]["value"] > cats["chat"]["accept_length"]["value"] + 0.5
        assert sum(c["output_tok_s"] for c in cats.values()) == pytest.approx(cell["output_tok_s"])
        assert sum(c["output_share"] for c in cats.values()) == pytest.approx(1.0)
        line = next(x for x in proc.stdout.splitlines() if x.split()[:2] == [str(cell["concurrency"]), "code"])
        assert f"{cats['code']['accept_length']['value']:.2f} per_request" in line


@pytest.mark.unit
def test_compare_shows_categories_against_the_baseline():
    from loadgen.report import category_compare
    from loadgen.report.compare import Run

    def run(name: str, code_tok_s: float) -> Run:
        cats = {"code": {"output_tok_s": code_tok_s, "request_tok_s": {"mean": 90.0}, "ttft_s": {"mean": 0.02},
                         "accept_length": {"value": 3.9, "source": "per_request"}},
                "chat": {"output_tok_s": 50.0, "request_tok_s": {"mean": 60.0}, "ttft_s": {"mean": 0.03},
                         "accept_length": {"value": 2.7, "source": "per_request"}}}
        return Run(name, name + ".json", {}, {(0, 32, 0.0): typed({"by_category": cats})})

    rows = category_compare.rows([run("b8", 100.0), run("b16", 125.0)], base=0)
    assert [(r["category"], r["run"], r["change"]) for r in rows] == [
        ("chat", "b8", 0.0), ("chat", "b16", 0.0), ("code", "b8", 0.0), ("code", "b16", pytest.approx(0.25))]
    text = category_compare.render([run("b8", 100.0), run("b16", 125.0)])
    assert "+25.0%" in text.splitlines()[-1] and text.splitlines()[-1].split()[:3] == ["32", "code", "b16"]
    assert category_compare.render([run("only", 1.0)]) is None
