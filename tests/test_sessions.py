"""Multi-turn sessions (`--dataset FILE --sessions`): rows split into turns, each turn's body built from the
server's own answers, and against the simulator with its prefix cache: 8 sessions of 4 turns send 32
requests, each turn's prompt holds the previous one and its answer, and later turns are served from the cache."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from loadgen.client.api import RequestOptions
from loadgen.files import read_json, read_jsonl
from loadgen.metrics.sessions import session_figures, turn_figures
from loadgen.names import Outcome
from loadgen.record import CellKey, Record
from loadgen.sim.prefix_cache import PageCache
from loadgen.workload.dataset_formats import parse_rows
from loadgen.workload.sessions import Conversation, SessionPlan, split_turns, think_times
from tests.conftest import run_loadgen

pytestmark = pytest.mark.untimed  # its tests of other tiers than unit time nothing against the machine

CHAT = {"messages": [{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": "one"}, {"role": "assistant", "content": "answer one"},
                     {"role": "user", "content": "two"}, {"role": "user", "content": "three"}],
        "think_time": [0.5, 2]}
SHAREGPT = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello there"},
                              {"from": "human", "value": "more"}, {"from": "gpt", "value": "sure"}]}


@pytest.mark.unit
def test_rows_split_into_user_turns_with_their_references():
    _, (chat,), _ = parse_rows(json.dumps(CHAT), "category")
    _, (share,), _ = parse_rows(json.dumps(SHAREGPT), "category")
    opening, turns = split_turns(chat)
    assert opening == [{"role": "system", "content": "Be brief."}]
    assert turns == [({"role": "user", "content": "one"}, "answer one"), ({"role": "user", "content": "two"}, None),
                     ({"role": "user", "content": "three"}, None)]
    assert split_turns(share)[1] == [({"role": "user", "content": "hi"}, "hello there"),
                                     ({"role": "user", "content": "more"}, "sure")]
    assert think_times(chat, 3, 9.0) == [0.0, 0.5, 2.0]  # the row's own, one per later turn
    assert think_times(share, 2, 1.5) == [0.0, 1.5]  # else --think-time
    _, _, bad = parse_rows(json.dumps({**CHAT, "think_time": -1}), "category")
    assert "think_time -1 must be seconds ≥ 0" in bad[0].reason


@pytest.mark.unit
def test_each_turn_carries_the_servers_answers():
    opts = RequestOptions(model="m", max_tokens=8)
    plan = SessionPlan(0, ({"role": "system", "content": "s"},), ({"role": "user", "content": "a"},
                       {"role": "user", "content": "b"}), (opts, RequestOptions(model="m", max_tokens=3)), (0.0, 1.0))
    talk = Conversation(plan)
    assert [m["content"] for m in talk.body(0)["messages"]] == ["s", "a"]
    talk.answered(0, "the server said this")
    second = talk.body(1)
    assert second["messages"] == [{"role": "system", "content": "s"}, {"role": "user", "content": "a"},
                                  {"role": "assistant", "content": "the server said this"},
                                  {"role": "user", "content": "b"}]
    assert second["max_tokens"] == 3


@pytest.mark.unit
def test_turn_figures_by_turn_index():
    def rec(session, turn, ttft_ms, prompt, cached, outcome=Outcome.OK):
        return Record("r", CellKey(0, 2), session * 1000 + turn, t_sent_ns=10**9, t_end_ns=2 * 10**9,
                      t_first_token_ns=10**9 + ttft_ms * 10**6, prompt_tokens=prompt, cached_tokens=cached,
                      session=session, turn=turn, outcome=outcome, completion_tokens=5)
    recs = [rec(0, 0, 10, 50, 0), rec(1, 0, 30, 60, 0), rec(0, 1, 4, 100, 80), rec(1, 1, 6, 120, 60),
            rec(1, 2, 9, 200, 100, Outcome.HTTP_ERROR)]
    turns = turn_figures(recs)
    assert [t["turn"] for t in turns] == [0, 1, 2]
    assert turns[0]["ttft_s"]["mean"] == pytest.approx(0.020) and turns[0]["cached_fraction"] == 0.0
    assert turns[1]["cached_tokens"] == 140 and turns[1]["cached_fraction"] == pytest.approx(140 / 220)
    assert turns[1]["prompt_tokens_mean"] == 110
    assert (turns[2]["requests"], turns[2]["ok"], turns[2]["ttft_s"]["mean"]) == (1, 0, None)
    assert session_figures(recs) == {"sessions": 2, "turns_mean": 2.5, "turns_max": 3, "ok_fraction": 0.8}
    assert turn_figures(recs[:0]) is None and session_figures([Record("r", CellKey(0, 1), 0)]) is None


@pytest.mark.unit
def test_the_simulators_prefix_cache_serves_whole_shared_pages():
    cache = PageCache(page_tokens=4)
    assert cache.admit(list(range(10))) == 0
    assert cache.admit(list(range(10)) + [99]) == 8  # two whole pages of the first prompt
    assert cache.admit([7] + list(range(10))) == 0  # a page is found only after the same prefix
    assert cache.admit(list(range(8))) == 7  # never the last prompt token


@pytest.mark.unit
def test_session_flags_are_checked_before_any_load(tmp_path, cli):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(CHAT) + "\n")
    url = ("--url", "http://127.0.0.1:9")
    for args, message in (((), "--sessions replays the user turns of --dataset rows"),
                          (("--dataset", str(path), "--api", "openai-completions"), "use --api openai-chat"),
                          (("--dataset", str(path), "--request-rate", "2"), "leave out --request-rate"),
                          (("--dataset", str(path), "--think-time", "-1"), "--think-time -1: must be")):
        res = cli(*url, "--sessions", *args)
        assert res.returncode == 2 and message in res.stderr, res.stderr
    res = cli(*url, "--dataset", str(path), "--think-time", "1")
    assert res.returncode == 2 and "--think-time applies to multi-turn sessions; add --sessions" in res.stderr


@pytest.mark.sim
def test_eight_sessions_of_four_turns(sim_factory, tmp_path):
    sim = sim_factory("--speed", "20", "--cache-report")
    rows = []
    for i in range(8):
        msgs = [{"role": "system", "content": f"You answer question set {i} briefly."}]
        for k in range(4):
            msgs += [{"role": "user", "content": f"Question {k}: what does step {k} of the build do?"},
                     {"role": "assistant", "content": "It does this. " * (k + 2)}]
        rows.append({"messages": msgs})
    path = tmp_path / "multi.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "r.json"
    proc = run_loadgen("--url", sim.url, "--dataset", str(path), "--sessions", "--concurrency", "4",
                       "--think-time", "0.01", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    (cell,) = read_json(str(out))["cells"]
    recs = read_jsonl(str(out).replace(".json", ".requests.jsonl"))
    assert len(recs) == 32 and cell["requests"]["ok"] == 32
    assert cell["sessions"] == {"sessions": 8, "turns_mean": 4.0, "turns_max": 4, "ok_fraction": 1.0}
    truth = {t["rid"]: t for t in sim.truth_rows()}
    by_session = defaultdict(list)
    for r in recs:
        by_session[r["session"]].append(r)
    for turns in by_session.values():
        turns.sort(key=lambda r: r["turn"])
        assert [r["turn"] for r in turns] == [0, 1, 2, 3]
        for a, b in zip(turns, turns[1:]):
            assert b["prompt_tokens"] > a["prompt_tokens"] + a["completion_tokens"]
            sent = truth[b["request_id"]]["prompt"]
            assert sent[: len(sent) - 1] == [*truth[a["request_id"]]["prompt"],
                                             {"role": "assistant", "content": a["answer"]}]
            assert b["t_sent_ns"] - a["t_end_ns"] >= 0.01e9  # after the answer and the think time
    by_turn = cell["by_turn"]
    assert [t["requests"] for t in by_turn] == [8, 8, 8, 8]
    assert by_turn[0]["cached_fraction"] < 0.1 < by_turn[1]["cached_fraction"] < by_turn[3]["cached_fraction"]
    assert by_turn[3]["cached_tokens"] == sum(truth[r["request_id"]]["cached_tokens"] for r in recs if r["turn"] == 3)
