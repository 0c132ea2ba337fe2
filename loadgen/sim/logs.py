"""The simulator's scheduler log: SGLang's "Decode batch" line, once per decode-log window.

SGLang logs one line every `--decode-log-interval` decode steps (on attention-TP rank 0):

    [2026-03-01 12:00:00 TP0] Decode batch, #running-req: 8, #token: 2310, token usage: 0.01, accept len: 3.92,
    accept rate: 0.37, cuda graph: True, gen throughput (token/s): 1834.20, #queue-req: 0

(one line). Here `accept len` is the window's Σ(committed tokens)/Σ(batch size) over its steps, i.e. the same
number the `sglang:spec_accept_length` gauge shows after that refresh, and `accept rate` is accepted drafts /
proposed drafts = (Σcommitted − Σbatch) / (Σbatch · budget). Lines go to a file (append) or to stdout ("-").
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from loadgen.sim.engine import Engine, WindowStats


def decode_line(engine: Engine, w: WindowStats, wall_s: float | None = None) -> str:
    """One SGLang-format decode log line for the window `w` that just closed."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() if wall_s is None else wall_s))
    accept_len = w.accepted / w.batch_sum if w.batch_sum else 0.0
    budget = max(engine.spec.budget, 1)
    accept_rate = (w.accepted - w.batch_sum) / (w.batch_sum * budget) if w.batch_sum else 0.0
    running = [r for r in engine.running if not r.aborted]  # the batch of the step that closed the window
    tokens = sum((r.prompt_tokens or 0) + r.generated for r in running)
    return (f"[{stamp} TP0] Decode batch, #running-req: {len(running)}, #token: {tokens}, "
            f"token usage: {tokens / 400000:.2f}, accept len: {accept_len:.2f}, accept rate: {accept_rate:.2f}, "
            f"cuda graph: True, gen throughput (token/s): {engine.gauge_gen_throughput:.2f}, "
            f"#queue-req: {len(engine.waiting)}")


class DecodeLog:
    """Writes a decode line at every window refresh of `engine` to `path` ("-" = stdout)."""

    def __init__(self, engine: Engine, path: str):
        try:
            self._fh: TextIO = sys.stdout if path == "-" else open(path, "a", encoding="utf-8", buffering=1)
        except OSError as exc:
            print(f"loadgen sim: --log-file {path}: {exc.strerror}; give a writable file path", file=sys.stderr)
            raise SystemExit(2) from None
        self._own = path != "-"
        engine.window_listeners.append(self._on_window)

    def _on_window(self, engine: Engine, w: WindowStats) -> None:
        self._fh.write(decode_line(engine, w) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._own:
            self._fh.close()
