"""Before the first cell: find out what the target is, check the matrix fits it, and size prompts with its
tokenizer (a 1-token probe measures the chat template's cost)."""

from __future__ import annotations

import aiohttp

from loadgen.config import RunConfig
from loadgen.errors import UsageError
from loadgen.run.dataset_setup import dataset_prompts, session_prompts
from loadgen.run.trace_setup import trace_prompts
from loadgen.target.discover import Target, discover, probe_prompt_tokens
from loadgen.workload.corpus import Corpus, WorkloadError, load_prompts_file, seeded_rng, stdlib_corpus
from loadgen.workload.dataset import DatasetPrompts
from loadgen.workload.prompts import PromptBuilder
from loadgen.workload.sessions import SessionPrompts
from loadgen.workload.tokenizers import find_tokenizer, sizing_description
from loadgen.workload.trace_prompts import TracePrompts

PROBE_CHARS = 400


async def find_target(session: aiohttp.ClientSession, cfg: RunConfig, url: str) -> Target:
    t = await discover(session, url, cfg.api, cfg.model, cfg.api_key_env, cfg.api_key_file)
    if t.max_model_len:
        too_long = [c for c in cfg.contexts if c + cfg.max_tokens > t.max_model_len]
        if too_long:
            raise UsageError(f"--contexts {','.join(map(str, too_long))} + --max-tokens {cfg.max_tokens} "
                             f"exceed the server's max model length {t.max_model_len}; use shorter contexts "
                             "or fewer --max-tokens")
    return t


def load_corpus(cfg: RunConfig) -> Corpus:
    try:
        texts = load_prompts_file(cfg.prompts_file, cfg.workload.max_bad_rows, quiet=True) if cfg.prompts_file else None
        return Corpus.from_texts(texts) if texts else Corpus(stdlib_corpus())
    except WorkloadError as exc:
        raise UsageError(str(exc)) from None


async def size_prompts(session: aiohttp.ClientSession, cfg: RunConfig, target: Target, run_id: str,
                       headers: dict) -> PromptBuilder | DatasetPrompts | TracePrompts | SessionPrompts:
    if cfg.workload.sessions:
        return await session_prompts(session, cfg, target, run_id, headers)
    if cfg.workload.dataset:
        return await dataset_prompts(session, cfg, target, run_id, headers)
    if cfg.trace.enabled:
        return await trace_prompts(session, cfg, target, run_id, headers)
    corpus = load_corpus(cfg)
    counter = await find_tokenizer(session, target)
    probe_text = corpus.window(seeded_rng(cfg.seed, "probe"), PROBE_CHARS)
    reported = await probe_prompt_tokens(session, target, probe_text, headers, api_key_env=cfg.api_key_env,
                                         key_file=cfg.api_key_file)
    builder = PromptBuilder(run_id, cfg.seed, target.model, corpus, counter, api=target.api,
                            context_spreads=dict(cfg.workload.context_spreads),
                            output_spread=cfg.workload.output_spread, shared_prefix=cfg.workload.shared_prefix)
    if counter:
        builder.overhead_tokens = reported - (await counter([probe_text]))[0]
    else:
        builder.chars_per_token = len(probe_text) / max(reported, 1)
    template = await counter.template_tokens(probe_text) if hasattr(counter, "template_tokens") else None
    builder.sizing = sizing_description(counter, builder.overhead_tokens, template)
    return builder
