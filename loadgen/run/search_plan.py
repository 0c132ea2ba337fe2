"""`loadgen search`'s cells: the probes of the walk (`results.search.walk`), one prompt length after another,
each measured as a normal cell; a probe already in the results (a resumed search) is not measured again.
Before each probe the early stop (`run.early_stop`) is told the nearest lower probe, its reference."""

from __future__ import annotations

from collections.abc import Iterator

from loadgen.config import SloConfig
from loadgen.console import log
from loadgen.metrics.oversaturation import Reference
from loadgen.names import SearchOver
from loadgen.record import CellKey
from loadgen.results.cell_result import CellResult
from loadgen.results.document import ResultsFile
from loadgen.results.search import SearchConfig, walk
from loadgen.results.search_report import search_section
from loadgen.results.slo_part import attainment_text
from loadgen.run.early_stop import OversaturationStop


def load_of(over: SearchOver, key: CellKey) -> float:
    return key.concurrency if over == SearchOver.CONCURRENCY else key.request_rate or 0.0


def reference(over: SearchOver, key: CellKey, cells: list[CellResult]) -> Reference | None:
    """The usable probe of the same prompt length nearest below `key`'s load, as the early stop's reference."""
    below = [c for c in cells if c.key.context_tokens == key.context_tokens and c.status == "ok"
             and load_of(over, c.key) < load_of(over, key) and c.throughput.output_tok_s
             and (c.latency.ttft_s or {}).get("p50")]
    if not below:
        return None
    c = max(below, key=lambda c: load_of(over, c.key))
    return Reference(c.key.label(), load_of(over, c.key), c.throughput.output_tok_s, c.latency.ttft_s["p50"])


class SearchPlan:
    def __init__(self, cfg: SearchConfig, slo: SloConfig, contexts: list[int], cap: int = 0,
                 early: OversaturationStop | None = None):
        self.cfg, self.slo, self.contexts, self.cap, self.early = cfg, slo, contexts, cap, early

    def cells(self, results: ResultsFile) -> Iterator[CellKey]:
        def cell_of(key: CellKey) -> dict | None:
            found = [c for c in results.cells if c.key == key]
            return found[-1].to_json() if found else None

        for ctx in self.contexts:
            for key in walk(self.cfg, ctx, cell_of, self.cap):
                if self.early is not None:
                    self.early.compare_with(reference(self.cfg.over, key, results.cells), load_of(self.cfg.over, key))
                yield key
                log(f"search: {key.label()} {attainment_text(cell_of(key).get('slo')) or 'not usable'}")
                self._write(results)
        self._write(results)

    def _write(self, results: ResultsFile) -> None:
        """The answer so far, as the results document's `search` part (saved with the next cell)."""
        results.sections["search"] = search_section(self.cfg, self.slo, self.contexts,
                                                    [c.to_json() for c in results.cells], self.cap)
