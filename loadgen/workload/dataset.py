"""Replaying a dataset: each request is one of the file's rows, as it is (`--dataset FILE`).

A cell is one load level over the rows: every row once, in a seeded order, or `--requests-per-cell` rows
sampled (seeded; rows repeat only when more are asked than the file holds). A request's max tokens is its
row's (`max_tokens`/`output_len`, else the ShareGPT reference answer's token count by the server's
tokenizer), else `--max-tokens`. With `--prefix-cache unique` (the default) the first message gets the
request's unique first line, so no prefix cache serves a repeated row; `allow` sends the rows unchanged.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field

from loadgen.client.api import RequestOptions, build_body
from loadgen.names import Api, DatasetFormat, PrefixCache
from loadgen.record import CellKey, load_tag
from loadgen.target.discover import TokenCounter
from loadgen.workload.corpus import seeded_rng
from loadgen.workload.dataset_formats import FORMATS, DatasetRow, parse_rows
from loadgen.workload.prefix import unique_prefix
from loadgen.workload.textfile import BadRow, WorkloadError, check_bad_rows, read_text


@dataclass
class Dataset:
    path: str
    format: DatasetFormat
    rows: list[DatasetRow]
    bad: list[BadRow] = field(default_factory=list)

    def describe(self) -> str:
        cats = Counter(r.category for r in self.rows if r.category is not None)
        shown = ", ".join(f"{c} {n}" for c, n in sorted(cats.items()))
        lengths = sum(r.max_tokens is not None or r.reference is not None for r in self.rows)
        bad = f"{_rows(len(self.bad))} bad, left out" if self.bad else "no bad rows"
        return (f"dataset {self.path}: {FORMATS[self.format]}, {_rows(len(self.rows))} usable ({bad}), "
                f"{lengths} with their own output length" + (f"; categories: {shown}" if shown else ""))

    @property
    def chat(self) -> bool:
        return self.format is not DatasetFormat.PROMPT


def _rows(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def load_dataset(path: str, category_field: str = "category", max_bad_rows: int = 0,
                 quiet: bool = False) -> Dataset:
    """The file's usable rows; its bad rows named on the console (unless `quiet`); WorkloadError when the file
    is not text, has no usable row, or more than `max_bad_rows` bad ones."""
    fmt, rows, bad = parse_rows(read_text(path, "--dataset"), category_field)
    check_bad_rows("--dataset", path, bad, len(rows), max_bad_rows, quiet)
    assert fmt is not None  # a file without a usable row was refused above
    return Dataset(path, fmt, rows, bad)


def check_api(ds: Dataset, api: Api) -> str | None:
    """How the rows meet the API: None when they fit, a note when prompt rows are wrapped as chat turns;
    WorkloadError when chat rows would lose their turns."""
    if ds.chat and api is not Api.OPENAI_CHAT:
        raise WorkloadError(f"--dataset {ds.path} holds chat turns ({FORMATS[ds.format]}); they go to the chat "
                            f"API with their turns intact: use --api openai-chat (not {api})")
    if not ds.chat and api is Api.OPENAI_CHAT:
        return "prompt rows are sent to the chat API as one user turn each (use --api openai-completions or " \
               "sglang-generate to send them as plain prompts)"
    return None


@dataclass
class DatasetPrompts:
    """The request bodies of a dataset's cells (the dataset counterpart of `PromptBuilder`)."""

    run_id: str
    seed: int
    model: str
    api: Api
    dataset: Dataset
    counter: TokenCounter | None
    prefix_cache: PrefixCache = PrefixCache.UNIQUE
    ignore_eos: bool | None = None  # None: on for rows that give an output length, off for the others
    overhead_tokens: int = 0
    chars_per_token: float = 4.0
    reference_tokens: dict[int, int] = field(default_factory=dict)  # id(row) → its answer's token count

    method = "dataset"

    def describe(self) -> dict:
        ds = self.dataset
        return {"method": self.method, "template_overhead_tokens": self.overhead_tokens, "source": "dataset",
                "dataset": ds.path, "format": ds.format, "rows": len(ds.rows), "bad_rows": len(ds.bad),
                "prefix_cache": self.prefix_cache,
                "ignore_eos": "rows that give a length" if self.ignore_eos is None else self.ignore_eos,
                "row_max_tokens": self.row_max_tokens()}

    def row_max_tokens(self) -> dict | None:
        """{rows, min, max}: the rows that set their own max tokens (`max_tokens`/`output_len`, or a ShareGPT
        answer's length) and its range; None when none does (every request asks for --max-tokens)."""
        own = [self.output_tokens(r, 0) for r in self.dataset.rows if r.max_tokens is not None or r.reference is not None]
        return {"rows": len(own), "min": min(own), "max": max(own)} if own else None

    async def count(self, texts: list[str]) -> list[int]:
        """Token counts by the server's tokenizer, else estimated from the probe's characters per token."""
        if self.counter is not None:
            return await self.counter(texts)
        return [round(len(t) / self.chars_per_token) for t in texts]

    async def prepare(self, max_model_len: int | None, default_max_tokens: int, max_bad_rows: int) -> None:
        """Count the ShareGPT answers' tokens, and drop (naming them) rows whose prompt and output exceed the
        model's context; WorkloadError when the bad rows are now too many."""
        ds = self.dataset
        refs = [(id(r), r.reference) for r in ds.rows if r.max_tokens is None and r.reference is not None]
        self.reference_tokens = dict(zip([key for key, _ in refs], await self.count([text for _, text in refs])))
        if not max_model_len:
            return
        prompt = await self.count([r.text for r in ds.rows])
        keep: list[tuple[DatasetRow, int]] = []
        over: list[tuple[DatasetRow, int]] = []
        for row, n in zip(ds.rows, prompt):
            total = n + self.overhead_tokens + self.output_tokens(row, default_max_tokens)
            (over if total > max_model_len else keep).append((row, total))
        for row, total in over:
            ds.bad.append(BadRow(row.line, f"over the model's context ({total} tokens of prompt and output > "
                                           f"{max_model_len})"))
        ds.rows = [r for r, _ in keep]
        check_bad_rows("--dataset", ds.path, [b for b in ds.bad if "context" in b.reason], len(ds.rows), 10**9)
        check_bad_rows("--dataset", ds.path, ds.bad, len(ds.rows), max_bad_rows, quiet=True)

    def output_tokens(self, row: DatasetRow, default: int) -> int:
        if row.max_tokens is not None:
            return row.max_tokens
        return max(1, self.reference_tokens.get(id(row), default)) if row.reference is not None else default

    def order(self, cell: CellKey, n: int) -> list[DatasetRow]:
        """The cell's `n` rows: seeded shuffles of the whole file, one after another."""
        rng = seeded_rng(self.seed, "dataset", cell.concurrency, cell.request_rate)
        out: list[DatasetRow] = []
        while len(out) < n:
            rows = list(self.dataset.rows)
            rng.shuffle(rows)
            out += rows
        return out[:n]

    async def bodies(self, cell: CellKey, n: int, opts: RequestOptions) -> tuple[list[dict], list[str | None]]:
        load = load_tag(cell)
        bodies, categories = [], []
        for seq, row in enumerate(self.order(cell, n)):
            tag = unique_prefix(self.run_id, cell.context_tokens, load, seq) if self.prefix_cache is PrefixCache.UNIQUE else ""
            given = row.max_tokens is not None or row.reference is not None
            row_opts = dataclasses.replace(opts, max_tokens=self.output_tokens(row, opts.max_tokens),
                                           ignore_eos=given if self.ignore_eos is None else self.ignore_eos)
            bodies.append(build_body(self.api, _tagged(row, tag), row_opts))
            categories.append(row.category)
        return bodies, categories


def _tagged(row: DatasetRow, tag: str) -> str | list[dict]:
    """The row's prompt with `tag` before its first message's content (or its text)."""
    if row.messages is None:
        return tag + (row.prompt or "")  # a row holds messages or a prompt
    msgs = [dict(m) for m in row.messages]
    msgs[0]["content"] = tag + msgs[0]["content"]
    return msgs
