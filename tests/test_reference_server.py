"""The reference server (tests/reference_server.py): each flag's behaviour seen over HTTP, and loadgen run
against it. Times are compared with the server's own step measured in the same test (a stream's mean gap)
or bounded from below by what a sleep guarantees, so they hold on a busy 2-core machine."""

from __future__ import annotations

import asyncio
import json
import math
import time
from dataclasses import dataclass

import aiohttp
import orjson
import pytest

from tests import side_by_side
from tests.conftest import run_loadgen
from tests.reference_server import DIVERGE_AT, LOOP_AT, count_prompt_tokens, running

pytestmark = pytest.mark.sim


@dataclass
class Streamed:
    words: list[str]
    times_s: list[float]  # when each content event was read, on the monotonic clock
    finish: str | None
    usage: dict | None

    @property
    def gaps_s(self) -> list[float]:
        return [b - a for a, b in zip(self.times_s, self.times_s[1:])]

    @property
    def mean_step_s(self) -> float:
        return (self.times_s[-1] - self.times_s[0]) / (len(self.times_s) - 1)


async def stream(session: aiohttp.ClientSession, url: str, prompt: str, max_tokens: int,
                 under_way: asyncio.Event | None = None, **extra) -> Streamed:
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens, "stream": True,
            "stream_options": {"include_usage": True}, **extra}
    out = Streamed([], [], None, None)
    async with session.post(url + "/v1/chat/completions", json=body) as resp:
        assert resp.status == 200
        async for line in resp.content:
            if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
                continue
            obj = orjson.loads(line[6:])
            if obj["choices"]:
                choice = obj["choices"][0]
                if choice["delta"].get("content"):
                    out.words.append(choice["delta"]["content"])
                    out.times_s.append(time.monotonic())
                    if under_way is not None and len(out.words) == 5:
                        under_way.set()
                out.finish = choice["finish_reason"] or out.finish
            else:
                out.usage = obj["usage"]
    return out


async def unary(session: aiohttp.ClientSession, url: str, prompt: str, max_tokens: int, api: str = "chat",
                **extra) -> dict:
    if api == "chat":
        path, body = "/v1/chat/completions", {"messages": [{"role": "user", "content": prompt}]}
    else:
        path, body = "/v1/completions", {"prompt": prompt}
    async with session.post(url + path, json=body | {"max_tokens": max_tokens, "logprobs": True} | extra) as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()


def tokens(answer: dict) -> list[str]:
    lp = answer["choices"][0]["logprobs"]
    return [c["token"] for c in lp["content"]] if "content" in lp else lp["tokens"]


def text(answer: dict) -> str:
    choice = answer["choices"][0]
    return choice["message"]["content"] if "message" in choice else choice["text"]


def call(coro_fn, *args):
    async def go():
        async with aiohttp.ClientSession() as session:
            return await coro_fn(session, *args)
    return asyncio.run(go())


def test_a_clean_server_speaks_openai_and_nothing_else(tmp_path):
    async def check(session, url):
        async with session.get(url + "/v1/models") as resp:
            assert (await resp.json())["data"][0]["id"] == "reference-model"
        for path in ("/metrics", "/server_info", "/version", "/props", "/tokenize", "/generate"):
            async with session.get(url + path) as resp:
                assert resp.status == 404, path
        prompt = "Explain how a bicycle stays upright. ü"
        chat = await unary(session, url, prompt, 40, ignore_eos=True)
        comp = await unary(session, url, prompt, 40, api="completions", ignore_eos=True)
        streamed = await stream(session, url, prompt, 40, ignore_eos=True)
        assert tokens(chat) == tokens(comp) == streamed.words and len(streamed.words) == 40
        assert text(chat) == text(comp) == "".join(streamed.words)
        assert chat["choices"][0]["finish_reason"] == streamed.finish == "length"
        expected = {"prompt_tokens": math.ceil(len(prompt.encode()) / 4), "completion_tokens": 40}
        for usage in (chat["usage"], comp["usage"], streamed.usage):
            assert {k: usage[k] for k in expected} == expected
        assert count_prompt_tokens(prompt) == expected["prompt_tokens"]
        assert tokens(await unary(session, url, prompt, 40)) == tokens(chat)  # a function of the prompt only
        async with session.post(url + "/v1/chat/completions", data=b"{") as resp:
            assert resp.status == 400
        async with session.post(url + "/v1/completions", json={"prompt": "x", "max_tokens": 0}) as resp:
            assert resp.status == 400

    with running(tmp_path) as url:
        call(check, url)


def test_some_prompts_stop_by_themselves_unless_ignore_eos(tmp_path):
    async def check(session, url):
        answers = await asyncio.gather(*(unary(session, url, f"prompt {i}", 300) for i in range(40)))
        stopped = [i for i, a in enumerate(answers) if a["choices"][0]["finish_reason"] == "stop"]
        assert 2 <= len(stopped) <= 20  # a quarter of prompts by hash
        agains = await asyncio.gather(*(unary(session, url, f"prompt {i}", 300, ignore_eos=True) for i in stopped))
        for i, again in zip(stopped, agains):
            n = answers[i]["usage"]["completion_tokens"]
            assert 16 <= n <= 256 and len(tokens(answers[i])) == n
            assert again["choices"][0]["finish_reason"] == "length" and again["usage"]["completion_tokens"] == 300
            assert tokens(again)[:n] == tokens(answers[i])

    with running(tmp_path, "--step-ms", "1") as url:
        call(check, url)


def test_requests_beyond_the_slots_wait_for_one(tmp_path):
    async def check(session, url):
        got = await asyncio.gather(*(stream(session, url, f"slot {i}", 20, ignore_eos=True) for i in range(3)))
        first_end = min(s.times_s[-1] for s in got)
        waited = [s for s in got if s.times_s[0] > first_end]
        assert len(waited) == 1  # two slots: the third request starts once one of the first two ended

    with running(tmp_path, "--slots", "2", "--step-ms", "10") as url:
        call(check, url)


def test_fffd_prompts_hold_replacement_characters_at_every_batch_size(tmp_path):
    prompts = [f"question number {i}" for i in range(60)]

    async def check(session, url):
        alone = [await unary(session, url, p, 40, ignore_eos=True) for p in prompts[:12]]
        together = await asyncio.gather(*(unary(session, url, p, 40, ignore_eos=True) for p in prompts))
        assert [tokens(a) for a in alone] == [tokens(a) for a in together[:12]]
        held = [i for i, a in enumerate(together) if "\ufffd" in text(a)]
        assert 12 <= len(held) <= 36  # 40 % of 60 by hash
        for i in held:
            assert tokens(together[i])[3] == "\ufffd" and tokens(together[i])[35] == "\ufffd"
        return held

    with running(tmp_path, "--fffd-fraction", "0.4", "--step-ms", "1") as url:
        held = call(check, url)
    with running(tmp_path) as url:
        clean = call(lambda s, u: asyncio.gather(*(unary(s, u, prompts[i], 40) for i in held)), url)
        assert not any("\ufffd" in text(a) for a in clean)


def test_a_batch_above_loop_above_repeats_one_word_to_the_end(tmp_path):
    prompts = [f"loop case {i}" for i in range(8)]

    async def check(session, url):
        alone = [tokens(await unary(session, url, p, 48, ignore_eos=True)) for p in prompts]
        four = await asyncio.gather(*(unary(session, url, p, 48, ignore_eos=True) for p in prompts[:4]))
        eight = await asyncio.gather(*(unary(session, url, p, 48, ignore_eos=True) for p in prompts))
        assert [tokens(a) for a in four] == alone[:4]  # 4 running is not above 4
        for out, ref in zip((tokens(a) for a in eight), alone):
            assert out[:LOOP_AT + 1] == ref[:LOOP_AT + 1]
            assert set(out[LOOP_AT:]) == {ref[LOOP_AT]} and len(out) == 48
        assert all(len(set(ref[LOOP_AT:])) > 5 for ref in alone)

    with running(tmp_path, "--loop-above", "4", "--step-ms", "2") as url:
        call(check, url)


def test_the_pause_stalls_every_stream_once(tmp_path):
    pause_s = 2.0

    async def check(session, url):
        await unary(session, url, "before", 4)  # request 1
        under_way = asyncio.Event()
        long = asyncio.create_task(stream(session, url, "a long stream", 60, under_way, ignore_eos=True))
        await under_way.wait()  # request 3, the one that triggers the pause, goes once request 2 streams
        t_sent = time.monotonic()
        third = await stream(session, url, "the third request", 10, ignore_eos=True)
        first = await long
        after = await stream(session, url, "after the pause", 50, ignore_eos=True)
        return t_sent, third, first, after

    events = tmp_path / "events.jsonl"
    with running(tmp_path, "--pause-once-after", "3", "--pause-s", str(pause_s), "--step-ms", "10",
                 "--events", str(events)) as url:
        t_sent, third, first, after = call(check, url)
    pauses = [e for e in map(json.loads, events.read_text().splitlines()) if e["event"] == "pause"]
    assert len(pauses) == 1 and pauses[0]["until_ns"] - pauses[0]["t_ns"] >= pause_s * 1e9
    assert pause_s - 0.1 <= max(first.gaps_s) <= pause_s + 1.5
    assert third.times_s[0] - t_sent >= pause_s - 0.1
    assert max(after.gaps_s) < pause_s / 2  # once


def test_the_slow_factor_makes_every_step_longer_for_good(tmp_path):
    async def check(session, url):
        before = [await stream(session, url, f"fast {i}", 20, ignore_eos=True) for i in range(2)]  # requests 1, 2
        return before, [await stream(session, url, "slow", 20, ignore_eos=True)]  # request 3: slow for good

    events = tmp_path / "events.jsonl"
    flags = ("--slow-after", "3", "--slow-factor", "4", "--step-ms", "20", "--events", str(events))
    with running(tmp_path, *flags) as url:
        before, slow = call(check, url)
    rows = [json.loads(line) for line in events.read_text().splitlines()]
    assert [(e["event"], e.get("from_request")) for e in rows if e["event"] != "request"] == [("slow", 3)]
    assert [e["n"] for e in rows if e["event"] == "request"] == [1, 2, 3]
    fast_s = min(s.mean_step_s for s in before)
    for s in slow:
        assert 3.0 <= s.mean_step_s / fast_s <= 4.6, (s.mean_step_s, fast_s)


def test_nondeterministic_prompts_change_from_call_to_call(tmp_path):
    async def check(session, url):
        return [tokens(await unary(session, url, "the same prompt", 40, ignore_eos=True)) for _ in range(3)]

    with running(tmp_path, "--nondeterministic-fraction", "1", "--step-ms", "1") as url:
        outs = call(check, url)
    assert outs[0][:DIVERGE_AT] == outs[1][:DIVERGE_AT] == outs[2][:DIVERGE_AT]
    assert outs[0][DIVERGE_AT:] != outs[1][DIVERGE_AT:] != outs[2][DIVERGE_AT:]
    with running(tmp_path, "--step-ms", "1") as url:
        outs = call(check, url)
    assert outs[0] == outs[1] == outs[2]


async def raw_events(session: aiohttp.ClientSession, url: str, prompt: str, max_tokens: int, **extra) -> list[dict]:
    """Every `data:` object of one chat stream, in order ([DONE] left out)."""
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens, "stream": True,
            "stream_options": {"include_usage": True}, **extra}
    async with session.post(url + "/v1/chat/completions", json=body, headers={"X-Request-Id": prompt}) as resp:
        assert resp.status == 200
        return [orjson.loads(line[6:]) for line in (await resp.read()).split(b"\n\n")
                if line.startswith(b"data: ") and line != b"data: [DONE]"]


def test_speculative_mode_streams_one_event_per_verify_step_and_sglangs_details(tmp_path):
    """--accept-length 3 --draft-cap 4: after the prefill's token, each event is one verify step of 1 to 4 tokens;
    the details event comes after the finish chunk and before usage, and its histogram (4 entries) adds up to the
    verify steps and, weighted by tokens per step, to the completion tokens less the prefill's."""
    async def check(session, url):
        spec = await raw_events(session, url, "spec one", 400, ignore_eos=True, return_spec_tokens_details=True)
        plain = await raw_events(session, url, "spec two", 40, ignore_eos=True)
        answer = await unary(session, url, "spec three", 30, ignore_eos=True, return_spec_tokens_details=True)
        return spec, plain, answer

    events = tmp_path / "events.jsonl"
    with running(tmp_path, "--accept-length", "3", "--draft-cap", "4", "--step-ms", "1", "--events",
                 str(events)) as url:
        spec, plain, answer = call(check, url)
    contents = [e["choices"][0]["delta"]["content"] for e in spec if e["choices"] and e["choices"][0]["delta"].get(
        "content")]
    kinds = ["content" if e["choices"] and e["choices"][0]["delta"].get("content") else
             "finish" if e["choices"] and e["choices"][0]["finish_reason"] else
             "spec" if "sglext" in e else "usage" if "usage" in e else "role" for e in spec]
    assert kinds == ["role"] + ["content"] * len(contents) + ["finish", "spec", "usage"]
    words_per_event = [len(c.split()) for c in contents]
    assert words_per_event[0] == 1 and all(1 <= n <= 4 for n in words_per_event)
    details = spec[-2]["sglext"]["spec_tokens_details"]
    hist, n = details["spec_correct_drafts_histogram"], details["spec_verify_ct"]
    assert n == len(contents) - 1 and len(hist) == 4 and sum(hist) == n
    assert hist == [words_per_event[1:].count(j + 1) for j in range(4)]
    completion = spec[-1]["usage"]["completion_tokens"]
    assert completion == 400 == sum(words_per_event) == 1 + sum((j + 1) * h for j, h in enumerate(hist))
    assert details["spec_accept_length"] == completion / n
    assert details["spec_num_correct_drafts"] == completion - 1 - n and details["spec_num_proposed_drafts"] == 3 * n
    assert 2.7 <= (completion - 1) / n <= 3.3  # 133 draws of mean 3, sd 0.82: ±0.3 is 4 standard errors
    assert not any("sglext" in e for e in plain)  # only when asked
    assert len(answer["sglext"]["spec_tokens_details"]["spec_correct_drafts_histogram"]) == 4
    rows = {r["rid"]: r for r in map(json.loads, events.read_text().splitlines())}
    assert rows["spec one"]["verify_ct"] == n and rows["spec one"]["correct_drafts"] == hist


def test_a_step_lasts_longer_per_running_request(tmp_path):
    """--step-ms 4 --step-ms-per-slot 4: a lone stream's step lasts 8 ms, each of 8 streams together 36 ms."""
    async def check(session, url):
        alone = await stream(session, url, "alone", 30, ignore_eos=True)
        together = await asyncio.gather(*(stream(session, url, f"eight {i}", 30, ignore_eos=True) for i in range(8)))
        return alone, together

    with running(tmp_path, "--step-ms", "4", "--step-ms-per-slot", "4") as url:
        alone, together = call(check, url)
    ratio = min(s.mean_step_s for s in together) / alone.mean_step_s
    assert 36 / 8 * 0.8 <= ratio <= 36 / 8 * 1.2, ratio


def test_info_serves_server_info_and_loadgen_takes_it_for_sglang(tmp_path):
    async def check(session, url):
        async with session.get(url + "/server_info") as resp:
            return await resp.json()

    out = tmp_path / "info.json"
    with running(tmp_path, "--info", "disable_cuda_graph=true", "--info", "tp_size=2", "--info", "note=a b",
                 "--accept-length", "2", "--draft-cap", "3") as url:
        assert call(check, url) == {"disable_cuda_graph": True, "tp_size": 2, "note": "a b"}
        res = run_loadgen("--url", url, "--concurrency", "2", "--contexts", "60", "--max-tokens", "20",
                          "--requests-per-cell", "4", "--out", str(out))
    assert res.returncode == 0 and "engine=sglang" in res.stderr, res.stdout + res.stderr
    cell = json.loads(out.read_text())["cells"][0]
    assert cell["status"] == "ok" and cell["accept_length"]["source"] == "per_request"


@side_by_side.background("reference-server-verified")
def build_verified(tmp, cleanups):
    """loadgen's run with --verify against the server; counts and contents only, so it is built beside the other
    waiting stacks (tests/side_by_side.py). (the run, its results file)"""
    out = tmp / "results.json"
    with running(tmp, "--fffd-fraction", "0.4", "--loop-above", "2") as url:
        return run_loadgen("--url", url, "--concurrency", "1,4", "--contexts", "64", "--max-tokens", "32",
                           "--requests-per-cell", "8", "--verify", "--out", str(out)), out


@pytest.fixture(scope="module")
def verified():
    try:
        yield side_by_side.result("reference-server-verified")
    finally:
        side_by_side.finish("reference-server-verified")


def test_loadgen_measures_and_verifies_it(verified):
    res, out = verified
    assert "engine=openai" in res.stderr, res.stdout + res.stderr
    assert res.returncode == 1, res.stdout + res.stderr  # c=4 loops: garbage
    doc = json.loads(out.read_text())
    one, four = doc["cells"]
    for cell in (one, four):
        assert cell["requests"]["ok"] == 8 and cell["output_tokens"] == 8 * 32
    assert one["correctness"]["exact_match_fraction"] == 1.0
    assert four["correctness"]["garbage"]["repetition_loop"]["count"] >= 1
