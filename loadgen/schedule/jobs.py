"""A cell's jobs: what each scheduled request sends, made on demand, and views over them (a phase's jobs
chained to the next phase's)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from loadgen.names import Phase
from loadgen.workload.prefix import relabel


@dataclass
class Job:
    seq: int
    phase: Phase
    body: dict
    session: int | None = None  # a turn of a multi-turn session (--sessions): the session's number
    turn: int | None = None  # ... and the turn's index in it, from 0


class JobList(Sequence):
    """Jobs `start..stop-1` of a cell, made on demand: request i reuses sized body i mod len(bodies) under its
    own sequence number (still unique, so no prefix cache serves it), and the first `warmup` are warmup. A
    duration-bound cell asks for a million jobs without building a million objects."""

    def __init__(self, bodies: list[dict], stop: int, warmup: int, start: int = 0,
                 categories: list[str | None] | None = None):
        self.bodies, self.stop, self.warmup, self.start = bodies, stop, warmup, start
        self.categories = categories  # per body: its dataset row's category

    def category(self, seq: int) -> str | None:
        """The category of request `seq` (that of the body it reuses), or None."""
        return self.categories[seq % len(self.categories)] if self.categories else None

    def __len__(self) -> int:
        return max(0, self.stop - self.start)

    def __getitem__(self, i):
        if isinstance(i, slice):
            lo, hi, _ = i.indices(len(self))
            return JobList(self.bodies, self.start + hi, self.warmup, self.start + lo, self.categories)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        seq = self.start + i
        n = len(self.bodies)
        body = self.bodies[seq] if seq < n else relabel(self.bodies[seq % n], seq % n, seq)
        return Job(seq=seq, phase=Phase.WARMUP if seq < self.warmup else Phase.MEASURE, body=body)


class _View(Sequence):
    """A lazy sequence of jobs: indexing and slicing come from `__len__` and `_at(i)` for 0 <= i < len."""

    def _at(self, i: int) -> Job:
        raise NotImplementedError

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._at(i)


class Chain(_View):
    """Two job sequences one after the other, as one (lazy: a duration-bound cell's jobs stay unbuilt)."""

    def __init__(self, first: Sequence[Job], second: Sequence[Job]):
        self.first, self.second = first, second

    def __len__(self) -> int:
        return len(self.first) + len(self.second)

    def _at(self, i: int) -> Job:
        n = len(self.first)
        return self.first[i] if i < n else self.second[i - n]


class Tail(_View):
    """Jobs `start..` of a sequence, not copied (the jobs a load never sent)."""

    def __init__(self, jobs: Sequence[Job], start: int):
        self.jobs, self.start = jobs, start

    def __len__(self) -> int:
        return max(0, len(self.jobs) - self.start)

    def _at(self, i: int) -> Job:
        return self.jobs[self.start + i]


class Window(_View):
    """Jobs `lo..hi-1` of a sequence, not copied."""

    def __init__(self, jobs: Sequence[Job], lo: int, hi: int):
        self.jobs, self.lo, self.hi = jobs, lo, max(lo, hi)

    def __len__(self) -> int:
        return self.hi - self.lo

    def _at(self, i: int) -> Job:
        return self.jobs[self.lo + i]


class Inserted(_View):
    """`extra` jobs placed before job `at` of `jobs` (a cell's verification requests, right after its warmup),
    lazily: slices are windows, so a duration-bound cell's million jobs stay unbuilt."""

    def __init__(self, jobs: JobList, extra: Sequence[Job], at: int):
        self.jobs, self.extra, self.at = jobs, extra, min(at, len(jobs))

    def category(self, seq: int) -> str | None:
        return self.jobs.category(seq)

    def __len__(self) -> int:
        return len(self.jobs) + len(self.extra)

    def __getitem__(self, i):
        if isinstance(i, slice) and i.step in (None, 1):
            lo, hi, _ = i.indices(len(self))
            return Window(self, lo, hi)
        return super().__getitem__(i)

    def _at(self, i: int) -> Job:
        if i < self.at:
            return self.jobs[i]
        if i < self.at + len(self.extra):
            return self.extra[i - self.at]
        return self.jobs[i - len(self.extra)]
