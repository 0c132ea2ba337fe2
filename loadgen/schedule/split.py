"""Splitting one cell's load: over worker processes (`--workers`) and over hosts (`--shard i/N`).

The split is the same in both: slot s of a cell's C slots belongs to part s mod N, and request j (sequence
number) to the part that owns slot j mod C. So N parts run C slots and every request exactly once between
them, whatever N, and the requests of part i are known without talking to the others.
"""

from __future__ import annotations

from collections.abc import Sequence


def slot_counts(slots: int, parts: int) -> list[int]:
    """Slots of each part when slot s goes to part s mod `parts`: [len(range(i, slots, parts)) for each i]."""
    return [len(range(i, slots, parts)) for i in range(parts)]


def part_of(seq: int, slots: int, parts: int) -> int:
    """The part that sends request `seq`: the owner of slot seq mod slots."""
    return (seq % slots) % parts


class ShardJobs(Sequence):
    """The jobs of part `index` of `parts`, in order, as a view of a cell's full job sequence (lazy, so a
    duration-bound cell's million jobs stay unbuilt)."""

    def __init__(self, jobs: Sequence, slots: int, parts: int, index: int):
        self.jobs, self.slots = jobs, max(slots, 1)
        self.owned = list(range(index, self.slots, parts))  # slot numbers of this part within each period
        full, rest = divmod(len(jobs), self.slots)
        self.n = full * len(self.owned) + sum(1 for s in self.owned if s < rest)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(self.n))]
        if k < 0:
            k += self.n
        if not 0 <= k < self.n:
            raise IndexError(k)
        period, j = divmod(k, len(self.owned))
        return self.jobs[period * self.slots + self.owned[j]]
