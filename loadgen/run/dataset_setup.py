"""Before the first cell of a dataset run: load the rows, measure the chat template's cost with a probe,
count the ShareGPT answers' tokens and check every row fits the model's context (bad rows named)."""

from __future__ import annotations

import aiohttp

from loadgen.config import RunConfig
from loadgen.console import log
from loadgen.errors import UsageError
from loadgen.target.discover import Target, probe_prompt_tokens
from loadgen.workload.dataset import DatasetPrompts, check_api, load_dataset
from loadgen.workload.sessions import SessionPrompts
from loadgen.workload.textfile import WorkloadError
from loadgen.workload.tokenizers import find_tokenizer

PROBE_TEXT = "Say hello in one word."


async def dataset_prompts(session: aiohttp.ClientSession, cfg: RunConfig, target: Target, run_id: str,
                          headers: dict) -> DatasetPrompts:
    w = cfg.workload
    assert w.dataset is not None  # set up for --dataset only
    try:
        ds = load_dataset(w.dataset, w.category_field, w.max_bad_rows, quiet=True)  # named when flags were read
        note = check_api(ds, target.api)
    except WorkloadError as exc:
        raise UsageError(str(exc)) from None
    counter = await find_tokenizer(session, target, whole_request=False)
    reported = await probe_prompt_tokens(session, target, PROBE_TEXT, headers, api_key_env=cfg.api_key_env,
                                         key_file=cfg.api_key_file)
    prompts = DatasetPrompts(run_id, cfg.seed, target.model, target.api, ds, counter, prefix_cache=w.prefix_cache,
                             ignore_eos=None if w.ignore_eos_source == "rows" else cfg.ignore_eos)
    if counter:
        prompts.overhead_tokens = reported - (await counter([PROBE_TEXT]))[0]
    else:
        prompts.chars_per_token = len(PROBE_TEXT) / max(reported, 1)
    try:
        await prompts.prepare(target.max_model_len, cfg.max_tokens, w.max_bad_rows)
    except WorkloadError as exc:
        raise UsageError(str(exc)) from None
    if note:
        log(note)
    return prompts


async def session_prompts(session: aiohttp.ClientSession, cfg: RunConfig, target: Target, run_id: str,
                          headers: dict) -> SessionPrompts:
    """The dataset's rows as sessions: its rows, tokenizer and settings, each turn's output length counted."""
    w = cfg.workload
    prompts = SessionPrompts(await dataset_prompts(session, cfg, target, run_id, headers), w.think_time_s)
    try:
        await prompts.prepare(target.max_model_len, cfg.max_tokens, w.max_bad_rows)
    except WorkloadError as exc:
        raise UsageError(str(exc)) from None
    return prompts
