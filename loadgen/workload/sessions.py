"""Multi-turn sessions (`--dataset FILE --sessions`): each row's user turns replayed as one conversation.

A row's conversation (OpenAI `messages`, or ShareGPT `conversations` as user/assistant messages) is split at
its user turns: turn k sends the opening system messages, every earlier user turn each followed by the
*server's own answer* to it, then user turn k. The row's assistant messages are not sent: the one after user
turn k is that turn's reference, whose token count (the server's tokenizer) is the turn's max tokens unless
the row gives `max_tokens`; without either, `--max-tokens`. Turn k + 1 is sent `think_time` seconds after turn
k's answer ended (the row's `think_time`, one number or one per turn, else `--think-time`).

With `--prefix-cache unique` (the default) the session's first message starts with its unique tag, so its
turns share their prefix (as a real user's do, a prefix cache may serve it) and no two sessions share one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from loadgen.client.api import RequestOptions, build_body
from loadgen.names import Api, PrefixCache
from loadgen.record import CellKey, load_tag
from loadgen.workload.dataset import DatasetPrompts
from loadgen.workload.dataset_formats import DatasetRow
from loadgen.workload.prefix import unique_prefix
from loadgen.workload.textfile import BadRow, check_bad_rows

MAX_TURNS = 1000  # request seq of turn k of session s = s · MAX_TURNS + k


def split_turns(row: DatasetRow) -> tuple[list[dict], list[tuple[dict, str | None]]]:
    """(opening system messages, [(user message, the assistant answer after it or None)]) of a row."""
    msgs = list(row.conversation or row.messages or [{"role": "user", "content": row.prompt}])
    first = next((i for i, m in enumerate(msgs) if m["role"] == "user"), len(msgs))
    opening = [m for m in msgs[:first] if m["role"] == "system"]
    turns: list[tuple[dict, str | None]] = []
    for m in msgs[first:]:
        if m["role"] == "user":
            turns.append(({"role": "user", "content": m["content"]}, None))
        elif m["role"] == "assistant" and turns and turns[-1][1] is None:
            turns[-1] = (turns[-1][0], m["content"])
    return opening, turns


def think_times(row: DatasetRow, turns: int, default_s: float) -> list[float]:
    """The wait before each turn (0 before the first): the row's think_time (one value, or one per turn
    after the first; the last repeats), else `default_s`."""
    t = row.think_time_s
    if t is None:
        gaps = [default_s] * (turns - 1)
    elif isinstance(t, list):
        gaps = [float(t[min(i, len(t) - 1)]) for i in range(turns - 1)]
    else:
        gaps = [float(t)] * (turns - 1)
    return [0.0, *gaps]


@dataclass(frozen=True)
class SessionPlan:
    """One session as it will be sent: its opening, user turns, each turn's options and the wait before it."""

    index: int
    opening: tuple[dict, ...]
    users: tuple[dict, ...]
    options: tuple[RequestOptions, ...]
    think_s: tuple[float, ...]
    api: Api = Api.OPENAI_CHAT


class Conversation:
    """A session in progress: the body of its next turn, given the answers so far."""

    def __init__(self, plan: SessionPlan):
        self.plan = plan
        self.history: list[dict] = list(plan.opening)

    @property
    def turns(self) -> int:
        return len(self.plan.users)

    def body(self, k: int) -> dict:
        """Turn k's request: the history (with the server's answers), then user turn k."""
        return build_body(self.plan.api, [*self.history, self.plan.users[k]], self.plan.options[k])

    def answered(self, k: int, answer: str) -> None:
        """Turn k's answer arrived: it joins the history after its user turn."""
        self.history += [self.plan.users[k], {"role": "assistant", "content": answer}]


@dataclass
class SessionPrompts:
    """The session plans of a dataset's cells (the multi-turn counterpart of `DatasetPrompts`, whose rows,
    tokenizer and settings it uses)."""

    rows: DatasetPrompts
    think_time_s: float = 0.0
    reference_tokens: dict[tuple[int, int], int] = field(default_factory=dict)  # (id(row), turn) → tokens

    method = "sessions"

    @property
    def model(self) -> str:
        return self.rows.model

    def describe(self) -> dict:
        return self.rows.describe() | {"sessions": True, "think_time_s": self.think_time_s}

    def output_tokens(self, row: DatasetRow, k: int, reference: str | None, default: int) -> int:
        if row.max_tokens is not None:
            return row.max_tokens
        return max(1, self.reference_tokens.get((id(row), k), default)) if reference is not None else default

    async def prepare(self, max_model_len: int | None, default_max_tokens: int, max_bad_rows: int) -> None:
        """Count every turn's reference answer and drop (naming them) sessions whose last turn would exceed
        the model's context: Σ user turns + Σ answers + the template per turn."""
        ds, rows = self.rows.dataset, self.rows
        refs = [(r, k, ref) for r in ds.rows for k, (_, ref) in enumerate(split_turns(r)[1]) if ref is not None]
        counts = await rows.count([ref for _, _, ref in refs])
        self.reference_tokens = {(id(r), k): n for (r, k, _), n in zip(refs, counts)}
        if not max_model_len:
            return
        users = await rows.count([r.text if not r.conversation else
                                  "\n".join(m["content"] for m in r.conversation if m["role"] != "assistant")
                                  for r in ds.rows])
        keep: list[tuple[DatasetRow, int]] = []
        over: list[tuple[DatasetRow, int]] = []
        for row, n in zip(ds.rows, users):
            turns = split_turns(row)[1]
            total = n + sum(self.output_tokens(row, k, ref, default_max_tokens) for k, (_, ref) in enumerate(turns))
            total += rows.overhead_tokens * len(turns)
            (over if total > max_model_len else keep).append((row, total))
        new = [BadRow(r.line, f"session over the model's context ({t} tokens at its last turn > {max_model_len})")
               for r, t in over]
        ds.bad += new
        ds.rows = [r for r, _ in keep]
        check_bad_rows("--dataset", ds.path, new, len(ds.rows), 10**9)
        check_bad_rows("--dataset", ds.path, ds.bad, len(ds.rows), max_bad_rows, quiet=True)

    def plan(self, row: DatasetRow, index: int, tag: str, opts: RequestOptions) -> SessionPlan:
        opening, turns = split_turns(row)
        opening = [dict(m) for m in opening]
        users = [dict(u) for u, _ in turns]
        first = opening[0] if opening else users[0]
        first["content"] = tag + first["content"]
        given = row.max_tokens is not None
        options = [replace(opts, max_tokens=self.output_tokens(row, k, ref, opts.max_tokens),
                           ignore_eos=(given or ref is not None) if self.rows.ignore_eos is None
                           else self.rows.ignore_eos) for k, (_, ref) in enumerate(turns)]
        return SessionPlan(index, tuple(opening), tuple(users), tuple(options),
                           tuple(think_times(row, len(turns), self.think_time_s)), self.rows.api)

    async def bodies(self, cell: CellKey, n: int, opts: RequestOptions) -> tuple[list[dict], list[str | None]]:
        """`n` sessions of the cell (rows in the dataset's seeded order): each job's body holds its plan."""
        rows = self.rows
        load = load_tag(cell)
        plans, categories = [], []
        for i, row in enumerate(rows.order(cell, n)):
            tag = unique_prefix(rows.run_id, cell.context_tokens, load, i) \
                if rows.prefix_cache is PrefixCache.UNIQUE else ""
            plans.append({"session": self.plan(row, i, tag, opts)})
            categories.append(row.category)
        return plans, categories
