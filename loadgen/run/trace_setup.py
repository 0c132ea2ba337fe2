"""Before the first cell of a trace replay: load the rows, measure the chat template's cost with a probe, check
every row fits the model's context (bad rows named) and make every row's prompt of its exact length."""

from __future__ import annotations

import aiohttp

from loadgen.config import RunConfig
from loadgen.errors import UsageError
from loadgen.target.discover import Target, probe_prompt_tokens
from loadgen.workload.corpus import Corpus, seeded_rng, stdlib_corpus
from loadgen.workload.textfile import WorkloadError
from loadgen.workload.tokenizers import find_tokenizer, sizing_description
from loadgen.workload.trace import load_trace
from loadgen.workload.trace_prompts import TracePrompts

PROBE_CHARS = 400


async def trace_prompts(session: aiohttp.ClientSession, cfg: RunConfig, target: Target, run_id: str,
                        headers: dict) -> TracePrompts:
    assert cfg.trace.trace is not None  # set up for --trace only
    try:
        trace = load_trace(cfg.trace.trace, cfg.workload.max_bad_rows, quiet=True)  # named when flags were read
    except WorkloadError as exc:
        raise UsageError(str(exc)) from None
    corpus = Corpus(stdlib_corpus())
    counter = await find_tokenizer(session, target)
    probe_text = corpus.window(seeded_rng(cfg.seed, "probe"), PROBE_CHARS)
    reported = await probe_prompt_tokens(session, target, probe_text, headers, api_key_env=cfg.api_key_env,
                                         key_file=cfg.api_key_file)
    prompts = TracePrompts(run_id, cfg.seed, target.model, target.api, trace, corpus, counter,
                           ignore_eos=cfg.ignore_eos)
    if counter:
        prompts.overhead_tokens = reported - (await counter([probe_text]))[0]
    else:
        prompts.chars_per_token = len(probe_text) / max(reported, 1)
    template = await counter.template_tokens(probe_text) if hasattr(counter, "template_tokens") else None
    prompts.sizing = sizing_description(counter, prompts.overhead_tokens, template)
    try:
        prompts.check_context(target.max_model_len)
    except WorkloadError as exc:
        raise UsageError(str(exc)) from None
    await prompts.build()
    return prompts
