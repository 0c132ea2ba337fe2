"""The parent ↔ worker wire (`loadgen.parallel.wire`): every message survives the round trip as itself, and
a malformed line fails with an error that says what is wrong."""

from __future__ import annotations

import pytest

from loadgen.parallel import wire
from loadgen.record import CellKey, Record

pytestmark = pytest.mark.unit

RECORD = Record(run_id="r", cell=CellKey(60, 8, None), seq=3, phase="measure", request_id="r-60-8-3",
                t_intended_ns=10, t_sent_ns=11, t_first_token_ns=15, t_end_ns=20, outcome="ok",
                completion_tokens=4, chunks=2, chunk_tokens=[1, 3], chunk_gaps_ns=[5], worker=2)

MESSAGES = [
    wire.Setup(url="http://127.0.0.1:1", api="openai-chat", timeout_s=30.0, idle_timeout_s=120.0,
               headers={"Authorization": "Bearer x"}, http_client="h1"),
    wire.Ready(),
    wire.CellStart(run_id="r", cell=CellKey(60, 8), attempt=1, slots=4, deadline_ns=None),
    wire.CellStart(run_id="r", cell=CellKey(1024, 2, 5.0), attempt=0, slots=1, deadline_ns=123),
    wire.JobGiven(seq=7, phase="warmup", body={"messages": [{"role": "user", "content": "hi"}]}),
    wire.End(), wire.Stop(), wire.Cancel(), wire.Exit(),
    wire.Sent(seq=7, t_ns=1_000_000_000_123),
    wire.RecordEnded(RECORD),
    wire.Done(client={"cpu_percent": 12.5, "lags": [0.001]}, unsent=2),
    wire.Ping(t_ns=1_000_000_000_000), wire.Pong(t_ns=1_000_000_000_000, t_worker_ns=7_000_000_000_123),
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips(msg):
    line = wire.encode(msg)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert wire.decode(line) == msg


def test_every_message_type_is_on_the_wire_under_its_own_tag():
    assert {type(m) for m in MESSAGES} == set(wire.MESSAGES.values())
    assert len({m.op for m in wire.MESSAGES.values()}) == len(wire.MESSAGES)


@pytest.mark.parametrize("line, says", [
    (b"not json\n", "not a JSON line"),
    (b"[1, 2]\n", "not a message"),
    (b'{"seq": 1}\n', "not a message"),
    (b'{"op": "jump"}\n', "unknown op 'jump'"),
    (b'{"op": "sent", "seq": 1}\n', "sent: missing t_ns"),
    (b'{"op": "end", "why": "x"}\n', "end: unexpected why"),
    (b'{"op": "sent", "seq": "1", "t_ns": 2}\n', "sent: seq should be int"),
    (b'{"op": "cell", "run_id": "r", "cell": {"concurrency": 1}, "attempt": 0, "slots": 1,'
     b' "deadline_ns": null}\n', "cell: KeyError"),
    (b'{"op": "done", "client": {}, "unsent": true}\n', "done: unsent should be int"),
])
def test_a_malformed_line_fails_clearly(line, says):
    with pytest.raises(wire.WireError, match=says):
        wire.decode(line)
