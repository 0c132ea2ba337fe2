"""The simulator's ground truth: one JSONL line per request, written when the request ends.

Fields: rid, api, stream, t_arrival_ns (handler received the body), t_first_chunk_ns (first content chunk
written), chunk_times_ns and chunk_tokens (one entry per content chunk), verify_ct (verify steps),
correct_drafts (the request's `spec_correct_drafts_histogram`: [j] = its verify steps that accepted j drafts, as
many entries as the draft has positions, min(block_size, budget + 1), as SGLang's fixed length),
prompt_tokens, completion_tokens, t_end_ns (last byte written), outcome; max_tokens and prompt (the messages or
text as received); prompt_kind (`sim.prompt_kind`) and accept_mean, the mean tokens per verify step the
request's steps were drawn from (accept_mean_config: the configuration's, for code).
"""

from __future__ import annotations

import orjson


class TruthLog:
    def __init__(self, path: str | None):
        self._fh = open(path, "ab") if path else None

    def write(self, row: dict) -> None:
        if self._fh is not None:
            self._fh.write(orjson.dumps(row) + b"\n")
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


def read_truth(path: str) -> list[dict]:
    with open(path, "rb") as fh:
        return [orjson.loads(line) for line in fh if line.strip()]
