"""The log source on a real command (`tail -F` of a file the test writes): only lines that arrive while a
cell is open count, the launch backlog is discarded, lines are weighted by #running-req, and the command
ends with the run."""

from __future__ import annotations

import asyncio
import time

import pytest

from loadgen.errors import UsageError
from loadgen.telemetry.accept_log import AcceptLogSource, LogReader, parse_line, split_command


def line(accept: float, running: int | None = None) -> str:
    run = f"#running-req: {running}, #token: 100, token usage: 0.01, " if running is not None else ""
    return f"[2026-03-01 12:00:00 TP0] Decode batch, {run}accept len: {accept:.2f}, accept rate: 0.40\n"


async def wait_for(pred, timeout_s: float = 5.0) -> None:
    t0 = time.monotonic()
    while not pred():
        assert time.monotonic() - t0 < timeout_s, "the log command did not deliver the lines in time"
        await asyncio.sleep(0.01)


@pytest.mark.unit
def test_parse_line():
    assert parse_line(line(3.21, 8)) == (3.21, 8)
    assert parse_line(line(5.0)) == (5.0, None)
    assert parse_line("[x] Prefill batch, #new-seq: 1, #new-token: 60") is None


@pytest.mark.sim
def test_windows_are_cut_to_cells(tmp_path):
    path = tmp_path / "server.log"
    path.write_text(line(99.0, 8) * 10)  # what `journalctl -f` prints at launch: the last lines, old

    def write(*lines: str) -> None:
        with open(path, "a") as fh:
            fh.writelines(lines)

    async def scenario():
        reader = LogReader(split_command(f"tail -n +1 -s 0.05 -F {path}"), settle_s=0.3)
        a = AcceptLogSource(reader)
        await a.start()
        assert reader.discarded_at_start == 10
        write(line(3.0, 2), line(3.0, 2), line(3.0, 2))
        await wait_for(lambda: reader.lines_total == 13)
        res_a = await a.stop()
        write(line(50.0, 8))  # between cells
        await wait_for(lambda: reader.lines_outside == 11)
        b = AcceptLogSource(reader)
        await b.start()
        write(line(5.0, 4), line(2.0, 1), "unrelated line\n")
        await wait_for(lambda: reader.lines_total == 16)
        res_b = await b.stop()
        c = AcceptLogSource(reader)  # a cell during which the server logged nothing
        await c.start()
        res_c = await c.stop()
        await reader.close()
        return reader, res_a, res_b, res_c

    reader, res_a, res_b, res_c = asyncio.run(scenario())
    assert res_a.available and res_a.values["per_source"] == {"log": 3.0} and res_a.values["lines"] == 3
    assert res_b.values["per_source"]["log"] == pytest.approx((5.0 * 4 + 2.0 * 1) / 5)
    assert res_b.values["lines"] == 2
    assert not res_c.available and "no 'accept len' line" in res_c.values["unavailable"]["log"]
    assert reader.proc.returncode is not None  # terminated with the run


@pytest.mark.sim
def test_bad_commands_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="not found"):
        split_command("no-such-program-xyz -f")
    with pytest.raises(UsageError, match="quote"):
        split_command("tail -F 'open")
    reader = LogReader(split_command(f"tail -F {tmp_path}/missing-dir/x.log --retry --no-such-flag"))
    with pytest.raises(UsageError, match="exited with status"):
        asyncio.run(reader.ensure_started())
