"""What the simulator writes: a deterministic output per prompt (greedy decoding of a fixed model), and two
output faults that appear only under batching (docs/faults.md, "Output faults"):

- `--garbage-above N`: the first token a request produces while more than N requests run starts a repetition
  loop (a LOOP_PERIOD-token n-gram of the prompt's own words); it lasts to the end of the output, as a greedy
  decoder that has begun to repeat itself goes on repeating;
- `--drift-above M --drift-after K`: the first token at position ≥ K produced while more than M requests run
  differs from the clean output (never equal to it), and the rest of the output follows another, equally
  deterministic, stream: the output diverges there and stays plausible text (no garbage).

A token id is an index into the stand-in tokenizer's words (`tokenizer.WORDS`); the text of a token is its
word with a leading space. Token k of prompt p is `mix(seed(p), k) mod V`: no period, so a clean output never
looks like a loop. The truth row of a request records where each fault began (`loop_from`, `drift_from`).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import orjson

from loadgen.sim.tokenizer import WORDS

V = len(WORDS)
LOOP_PERIOD = 4
DRIFT = 0x5F3759DF
MASK = (1 << 64) - 1


def mix(seed: int, k: int) -> int:
    """A hash of (seed, k): Python's tuple hash of two ints, which no PYTHONHASHSEED randomises (a tenth of
    the cost of a splitmix64 in Python; the outputs are compared within one simulator process anyway)."""
    return hash((seed, k)) & MASK


def prompt_seed(prompt: object) -> int:
    """The seed of a prompt: the CRC-32 of its text, or of its messages as JSON."""
    data = prompt.encode() if isinstance(prompt, str) else orjson.dumps(prompt, option=orjson.OPT_SORT_KEYS)
    return zlib.crc32(data)


def clean_token(seed: int, k: int) -> int:
    return mix(seed, k) % V


def text_of(tokens: list[int]) -> str:
    return "".join(" " + WORDS[t] for t in tokens)


@dataclass
class OutputFaults:
    """The two output faults (None: off)."""

    garbage_above: int | None = None
    drift_above: int | None = None
    drift_after: int = 0

    def any(self) -> bool:
        return self.garbage_above is not None or self.drift_above is not None


@dataclass(eq=False)
class Output:
    """One request's output so far, and where its faults began."""

    seed: int
    tokens: list[int]
    loop_from: int | None = None
    drift_from: int | None = None

    def extend(self, k: int, running: int, faults: OutputFaults) -> None:
        """Add k tokens produced while `running` requests run."""
        if not faults.any():  # the common case, once per emission of every request: no call per token
            n, seed = len(self.tokens), self.seed
            self.tokens.extend((hash((seed, pos)) & MASK) % V for pos in range(n, n + k))
            return
        for _ in range(k):
            self.tokens.append(self._next(len(self.tokens), running, faults))

    def _next(self, pos: int, running: int, f: OutputFaults) -> int:
        if self.loop_from is None and f.garbage_above is not None and running > f.garbage_above:
            self.loop_from = pos
        if self.loop_from is not None:
            return mix(self.seed ^ 0xA5A5, (pos - self.loop_from) % LOOP_PERIOD) % V
        if self.drift_from is None and f.drift_above is not None and running > f.drift_above \
                and pos >= f.drift_after:
            self.drift_from = pos
        clean = clean_token(self.seed, pos)
        if self.drift_from is None:
            return clean
        return (clean + 1 + mix(self.seed ^ DRIFT, pos) % (V - 1)) % V
