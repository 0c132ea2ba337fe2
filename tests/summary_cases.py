"""Cells of records that reach every branch of a cell's summary, made the same way on every machine (seeded):
what `tests/test_columnar_summary.py` builds each cell from, as records and as the columns a long cell keeps.

Each case is (name, records, build_cell keyword arguments). Together they hold: failed, cancelled and abandoned
requests, one never sent, fields that are None (no first token, no usage, no last-token time), categories,
sessions and turns, reasoning, an open-loop cell, a shared prefix, latency targets, the server's per-request
`spec` as SGLang gives it (numbers and a histogram), as llama.cpp gives it (draft counts), with odd values
(a string, a bool, a nested dict, None), records without a spec, and records that ended out of order.
"""

from __future__ import annotations

import random

from loadgen.config import SloConfig
from loadgen.names import Outcome
from loadgen.record import CellKey, Record, request_id_for

MS = 1_000_000
T0 = 7_300_000_000_000

Case = tuple[str, list[Record], dict]


def _record(rng: random.Random, cell: CellKey, seq: int, t_sent: int, counts: bool = True) -> Record:
    n = rng.randint(1, 9)
    tokens = [1] + [rng.randint(1, 6) for _ in range(n - 1)]
    gaps = [rng.randint(2 * MS, 30 * MS) for _ in range(n - 1)]
    first = t_sent + rng.randint(20 * MS, 400 * MS)
    last = first + sum(gaps)
    r = Record(run_id="case", cell=cell, seq=seq, request_id=request_id_for("case", cell, seq),
               t_intended_ns=t_sent - rng.randint(0, 3 * MS), t_sent_ns=t_sent, t_first_byte_ns=first - MS,
               t_first_token_ns=first, t_last_token_ns=last, t_end_ns=last + rng.randint(0, 2 * MS),
               status=200, prompt_tokens=cell.context_tokens + rng.randint(0, 5), completion_tokens=sum(tokens),
               chunks=n, chunk_tokens=tokens if counts else None, chunk_gaps_ns=gaps, worker=seq % 2)
    r.t_first_answer_ns = first
    return r


def closed_loop(cell: CellKey, n: int, seed: int, counts_every: int = 7) -> list[Record]:
    """`cell.concurrency` slots, each sending its next request as its previous one ends; records in end order."""
    rng = random.Random(seed)
    free = [T0] * cell.concurrency
    recs = []
    for seq in range(n):
        s = min(range(cell.concurrency), key=free.__getitem__)
        r = _record(rng, cell, seq, free[s] + rng.randint(0, MS), counts=seq % counts_every != 0)
        free[s] = r.t_end_ns
        recs.append(r)
    recs.sort(key=lambda r: r.t_end_ns)
    return recs


def _fail(r: Record, outcome: Outcome, error: str) -> None:
    r.outcome, r.error, r.status = outcome, error, 500 if outcome == Outcome.HTTP_ERROR else None
    if outcome != Outcome.ABANDONED:
        r.completion_tokens = None


def sglang_spec(rng: random.Random, r: Record) -> dict:
    steps = max(1, (r.completion_tokens or 1) // 3)
    hist = [rng.randint(0, 4) for _ in range(6)]
    return {"spec_accept_rate": rng.random(), "spec_accept_length": 1 + 3 * rng.random(),
            "spec_num_correct_drafts": rng.randint(0, 60), "spec_num_proposed_drafts": rng.randint(60, 120),
            "spec_verify_ct": steps, "spec_correct_drafts_histogram": hist}


def _mixed_outcomes(rng: random.Random) -> Case:
    plain = closed_loop(CellKey(context_tokens=60, concurrency=8), 300, 1)
    for i, r in enumerate(plain):
        if i % 13 == 5:
            _fail(r, Outcome.HTTP_ERROR, "HTTP 500: boom")
        elif i % 41 == 7:
            _fail(r, Outcome.CANCELLED, "cancelled")
        elif i % 57 == 3:
            r.t_first_token_ns = r.t_last_token_ns = r.t_first_answer_ns = None
            _fail(r, Outcome.PROTOCOL_ERROR, "no content")
        if i % 17 == 2:
            r.t_last_token_ns = None
        if i % 29 == 4:
            r.retried_on_new_connection = 1
    return "closed_loop_mixed_outcomes", plain, {}


def _sglang(rng: random.Random) -> Case:
    spec = closed_loop(CellKey(context_tokens=1024, concurrency=4), 160, 2)
    for i, r in enumerate(spec):
        r.spec = sglang_spec(rng, r) if i % 11 else None
        if i % 23 == 1:
            r.spec = {"spec_verify_ct": 3.0, "spec_accept_length": "n/a", "flag": True, "nested": {"a": 1}}
        if i % 31 == 2:
            r.spec = {}
        r.cached_tokens = rng.randint(0, 512) if i % 3 else None
    return "sglang_spec_and_cache", spec, {}


def _llamacpp(rng: random.Random) -> Case:
    llama = closed_loop(CellKey(context_tokens=60, concurrency=2), 80, 3)
    for i, r in enumerate(llama):
        r.spec = {"draft_n": rng.randint(4, 40), "draft_n_accepted": rng.randint(0, 4)} if i % 5 else \
            {"draft_n": None}
    return "llamacpp_drafts", llama, {}


def _categories(rng: random.Random) -> Case:
    cat = closed_loop(CellKey(context_tokens=60, concurrency=6), 200, 4)
    for i, r in enumerate(cat):
        r.category = ("code", "chat", None)[i % 3]
        if i % 19 == 0:
            _fail(r, Outcome.HTTP_ERROR, "HTTP 503")
        if i % 4 == 0:
            r.spec = {"spec_verify_ct": rng.randint(1, 9)}
    return "categories", cat, {}


def _sessions(rng: random.Random) -> Case:
    sess = closed_loop(CellKey(context_tokens=60, concurrency=4), 120, 5)
    for i, r in enumerate(sess):
        r.session, r.turn = i // 4, i % 4
        r.cached_tokens = None if r.turn == 0 else rng.randint(10, 50)
        r.answer = f"answer {i}"
        if i % 21 == 3:
            _fail(r, Outcome.HTTP_ERROR, "HTTP 500")
    return "sessions", sess, {}


def _abandoned(rng: random.Random) -> Case:
    cancel = closed_loop(CellKey(context_tokens=60, concurrency=4), 120, 6)
    for i, r in enumerate(cancel):
        if i % 4 == 1:
            r.outcome, r.abandon_after_tokens = Outcome.ABANDONED, 8
            if i % 8 == 1:
                r.completion_tokens = None
    return "abandoned", cancel, {}


def _reasoning(rng: random.Random) -> Case:
    think = closed_loop(CellKey(context_tokens=60, concurrency=3), 90, 7)
    for i, r in enumerate(think):
        if i % 3:
            r.t_first_reasoning_ns = r.t_first_token_ns
            r.t_first_answer_ns = None if i % 10 == 1 else (r.t_first_token_ns or 0) + 40 * MS
            r.reasoning_tokens = None if i % 7 == 2 else rng.randint(1, 20)
    return "reasoning", think, {}


def _open_loop(rng: random.Random) -> Case:
    open_cell = CellKey(context_tokens=60, concurrency=0, request_rate=20.0)
    opened = []
    for seq in range(150):
        intended = T0 + seq * 50 * MS + rng.randint(0, 5 * MS)
        r = _record(rng, open_cell, seq, intended + rng.randint(0, 4 * MS))
        r.t_intended_ns = intended
        opened.append(r)
    opened[10].t_sent_ns, opened[10].t_end_ns = 0, 0
    opened[10].t_first_token_ns = opened[10].t_last_token_ns = opened[10].t_first_byte_ns = None
    _fail(opened[10], Outcome.CONNECTION_ERROR, "refused")
    opened.sort(key=lambda r: r.t_end_ns)
    return "open_loop", opened, {}


def _shared_prefix(rng: random.Random) -> Case:
    prefix = closed_loop(CellKey(context_tokens=1024, concurrency=4), 100, 8)
    for r in prefix:
        r.cached_tokens = 0 if r.seq < 4 else 512
    return "shared_prefix", prefix, {"shared_prefix": (4, 512)}


def _latency_targets(rng: random.Random) -> Case:
    slo = closed_loop(CellKey(context_tokens=60, concurrency=8), 200, 9)
    for i, r in enumerate(slo):
        if i % 15 == 3:
            _fail(r, Outcome.HTTP_ERROR, "HTTP 500")
    targets = SloConfig(slo_targets={"ttft": 0.25, "e2e": 0.4}, slo_attainment=0.9)
    return "latency_targets", slo, {"slo": targets, "not_sent": 3}


def _three_requests(rng: random.Random) -> Case:
    return "three_requests", closed_loop(CellKey(context_tokens=60, concurrency=1), 3, 10), {}


# In this order: the cases share one seeded generator, so each draws what it drew when the golden file was made.
_CASES = (_mixed_outcomes, _sglang, _llamacpp, _categories, _sessions, _abandoned, _reasoning, _open_loop,
          _shared_prefix, _latency_targets, _three_requests)


def cases() -> list[Case]:
    """Every case (module docstring)."""
    rng = random.Random(5)
    return [make(rng) for make in _CASES]
