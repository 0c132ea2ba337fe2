"""The three dataset formats, detected from the rows themselves, and each row's request.

- `openai-chat`: JSONL rows with `messages: [{role, content}, ...]`, sent to the chat API with every turn.
- `sharegpt`: a JSON list, or JSONL, of rows with `conversations: [{from, value}, ...]`: the first human turn
  (and a system turn before it) is the prompt; the next gpt turn is the reference answer, whose token count is
  the request's output length.
- `prompt`: JSONL rows with `prompt` (or `text`).

Any row may give `max_tokens` (or `output_len`) and a category (`--category-field`, default `category`). The
format is the first usable row's; a row of another format is a bad row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import orjson

from loadgen.names import DatasetFormat
from loadgen.workload.textfile import BadRow

FORMATS = {DatasetFormat.OPENAI_CHAT: "OpenAI chat JSONL (messages)", DatasetFormat.SHAREGPT: "ShareGPT (conversations)",
           DatasetFormat.PROMPT: "prompt JSONL (prompt/text)"}
NAMES = {DatasetFormat.OPENAI_CHAT: "OpenAI chat", DatasetFormat.SHAREGPT: "ShareGPT", DatasetFormat.PROMPT: "prompt"}
HUMAN = ("human", "user")
GPT = ("gpt", "assistant", "chatgpt", "model", "bard", "bing")


@dataclass(frozen=True)
class DatasetRow:
    """One usable row: `messages` (chat turns) or `prompt` (text), its own output length if it gives one,
    the reference answer (ShareGPT) whose length is used otherwise, and its category."""

    line: int
    messages: list[dict] | None = None
    prompt: str | None = None
    max_tokens: int | None = None
    reference: str | None = None
    category: str | None = None
    conversation: tuple[dict, ...] | None = None  # every turn as {role, content} (for --sessions)
    think_time_s: float | list | None = None  # the row's `think_time` (s): one for every turn, or one per turn

    @property
    def text(self) -> str:
        """The prompt's text (chat turns joined), for sizing and context checks."""
        return self.prompt if self.prompt is not None else "\n".join(m["content"] for m in self.messages or ())


class RowError(ValueError):
    pass


def _a(name: str) -> str:
    """The name with its indefinite article: "an OpenAI chat", "a ShareGPT"."""
    return ("an " if name[0].lower() in "aeiou" else "a ") + name


def row_format(obj: dict) -> DatasetFormat:
    if "messages" in obj:
        return DatasetFormat.OPENAI_CHAT
    if "conversations" in obj:
        return DatasetFormat.SHAREGPT
    if "prompt" in obj or "text" in obj:
        return DatasetFormat.PROMPT
    raise RowError("no prompt field (expected messages, conversations, or prompt/text)")


def _messages(value) -> list[dict]:
    if not isinstance(value, list) or not value:
        raise RowError("messages must be a non-empty list of {role, content}")
    out = []
    for m in value:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise RowError("every message needs a string role and a string content")
        out.append(m)
    if not any(m["content"].strip() for m in out):
        raise RowError("empty prompt (every message's content is blank)")
    return out


def _conversation(turns: list[dict]) -> tuple[dict, ...]:
    """ShareGPT turns as chat messages: human → user, gpt (and the other model names) → assistant."""
    role = {"system": "system", **dict.fromkeys(HUMAN, "user"), **dict.fromkeys(GPT, "assistant")}
    return tuple({"role": role[t["from"]], "content": t["value"]} for t in turns
                 if isinstance(t, dict) and t.get("from") in role and isinstance(t.get("value"), str))


def _think_time(obj: dict) -> float | list | None:
    value = obj.get("think_time")
    if value is None:
        return None
    ok = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1e6  # noqa: E731
    if ok(value) or (isinstance(value, list) and value and all(ok(v) for v in value)):
        return value
    raise RowError(f"think_time {value!r} must be seconds ≥ 0, or a list of them (one per turn)")


def _sharegpt(value) -> tuple[list[dict], str | None]:
    """(prompt messages, reference answer): system turns before the first human turn, that turn, then the
    next gpt turn's text."""
    if not isinstance(value, list) or not value:
        raise RowError("conversations must be a non-empty list of {from, value}")
    turns = [t for t in value if isinstance(t, dict) and isinstance(t.get("value"), str)]
    first = next((i for i, t in enumerate(turns) if t.get("from") in HUMAN), None)
    if first is None:
        raise RowError("no human turn in conversations")
    if not turns[first]["value"].strip():
        raise RowError("empty prompt (the first human turn is blank)")
    msgs = [{"role": "system", "content": t["value"]} for t in turns[:first] if t.get("from") == "system"]
    msgs.append({"role": "user", "content": turns[first]["value"]})
    answer = next((t["value"] for t in turns[first + 1:] if t.get("from") in GPT), None)
    return msgs, answer


def _max_tokens(obj: dict) -> int | None:
    value = obj.get("max_tokens", obj.get("output_len"))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RowError(f"max_tokens/output_len {value!r} must be a positive integer")
    return value


def _category(obj: dict, field: str) -> str | None:
    value = obj.get(field)
    if value is None or isinstance(value, (dict, list)):
        return None
    return str(value)


def parse_row(obj, line: int, fmt: DatasetFormat | None, category_field: str) -> DatasetRow:
    """One row of format `fmt` (None: the row's own), or RowError with the reason."""
    if not isinstance(obj, dict):
        raise RowError("not a JSON object")
    kind = row_format(obj)
    if fmt is not None and kind != fmt:
        raise RowError(f"{_a(NAMES[kind])} row in {_a(NAMES[fmt])} file")
    common = DatasetRow(line=line, max_tokens=_max_tokens(obj), category=_category(obj, category_field),
                        think_time_s=_think_time(obj))
    match kind:
        case DatasetFormat.OPENAI_CHAT:
            msgs = _messages(obj["messages"])
            return replace(common, messages=msgs, conversation=tuple(msgs))
        case DatasetFormat.SHAREGPT:
            msgs, answer = _sharegpt(obj["conversations"])
            return replace(common, messages=msgs, reference=answer, conversation=_conversation(obj["conversations"]))
    text = obj.get("prompt", obj.get("text"))
    if not isinstance(text, str) or not text.strip():
        raise RowError("empty prompt")
    return replace(common, prompt=text)


def json_objects(text: str) -> tuple[list[tuple[int, object]], list[BadRow]]:
    """(line, value) of every item of a JSON list file, or of every line of a JSONL file, and the lines that
    are not JSON."""
    if text.lstrip().startswith("["):
        try:
            return _list_items(text), []
        except json.JSONDecodeError as exc:
            return [], [BadRow(exc.lineno, f"invalid JSON ({exc.msg})")]
    items: list[tuple[int, object]] = []
    bad: list[BadRow] = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            items.append((i, orjson.loads(line)))
        except orjson.JSONDecodeError as exc:
            bad.append(BadRow(i, f"invalid JSON ({str(exc).split(':')[0]})"))
    return items, bad


def _list_items(text: str) -> list[tuple[int, object]]:
    """The items of a JSON list with the line each starts on."""
    decoder = json.JSONDecoder()
    items: list[tuple[int, object]] = []
    i = text.index("[") + 1
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i >= len(text) or text[i] == "]":
            return items
        value, end = decoder.raw_decode(text, i)
        items.append((text.count("\n", 0, i) + 1, value))
        i = end


def parse_rows(text: str, category_field: str) -> tuple[DatasetFormat | None, list[DatasetRow], list[BadRow]]:
    """(format, usable rows, bad rows) of a dataset file's text."""
    items, bad = json_objects(text)
    listed = text.lstrip().startswith("[")
    fmt, rows = None, []
    for k, (line, obj) in enumerate(items, 1):
        try:
            row = parse_row(obj, line, fmt, category_field)
        except RowError as exc:
            bad.append(BadRow(line, f"item {k}: {exc}" if listed else str(exc)))
            continue
        if fmt is None and isinstance(obj, dict):  # parse_row took obj: a dict
            fmt = row_format(obj)
        rows.append(row)
    bad.sort(key=lambda b: b.line)
    return fmt, rows, bad
