"""Verification requests of a run (`--verify`; docs/verify.md): the reference, each cell's verification jobs
and the sender that answers them.

Before the first cell the reference is answered one request at a time, twice over (the second pass is the
server's own noise floor: prompts it answers differently alone), or read from `--verify-reference` (or a
sweep's reference configuration), and saved where `--verify-save-reference` says; what the reference says of
itself (its own garbage, its floor) is said once and kept in the results (`summary`). In every cell the
verification prompts are jobs of the cell's own load, right after its warmup: they take slots of the closed
loop (or arrivals of the open loop) like any request, so the server sees the cell's concurrency and no more.
Their records (phase `verify`) reach every sink with their verdict, and are left out of every latency and
throughput figure of the cell; the verifier hands them to the builder with what they are judged by
(`verification`: `results.correctness.Verification`), and `build_cell` makes the cell's `correctness`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

import aiohttp

from loadgen.client.verify_request import VerifyOutput, post_verify, verify_body
from loadgen.config import VerifyConfig
from loadgen.console import log
from loadgen.errors import UsageError
from loadgen.metrics.correctness import verdict
from loadgen.names import Api, Phase
from loadgen.record import CellKey, Record
from loadgen.results.correctness import Verification
from loadgen.schedule.cell_run import SendFn
from loadgen.schedule.jobs import Inserted, Job, JobList
from loadgen.verify.prompts import prompts_digest
from loadgen.verify.reference import Reference, check_matches, reference_lines, reference_summary

REFERENCE_RUN = "verify-reference"  # the run id of the reference's own requests (they are no cell's records)
REFERENCE_PASSES = 2  # the reference answered twice, one at a time: the second pass is the server's noise floor


class Verifier:
    """The run's verification: its prompts, its reference, the jobs it adds to a cell and their sender."""

    def __init__(self, cfg: VerifyConfig, api: Api, base_url: str, prompts: list[str],
                 reference: Reference | None = None):
        self.cfg = cfg
        self.api = api
        self.base_url = base_url
        self.prompts = prompts
        self.digest = prompts_digest(prompts)
        self.reference = reference
        self.model = ""
        if reference is not None:
            check_matches(reference, self.digest, cfg.max_tokens)

    @property
    def reference_name(self) -> str:
        return self.reference.source if self.reference is not None else "run_start"

    def verification(self, records: Sequence[Record]) -> Verification:
        """A cell's verification records, for the builder, with the reference and the limits they are judged by."""
        c = self.cfg
        assert c.mode is not None  # a Verifier is made for --verify only
        return Verification(records, c.mode, self.reference_name, c.max_tokens, c.max_garbage_fraction)

    def body(self, index: int) -> dict[str, Any]:
        return verify_body(self.api, self.prompts[index], self.model, self.cfg.max_tokens)

    async def prepare(self, session: aiohttp.ClientSession, model: str) -> None:
        """Before the first cell: the reference answered one request at a time, twice, unless one was given;
        saved where asked; what it says of itself logged once. A reference request that fails ends the run
        before any load (exit 2: nothing to compare with)."""
        self.model = model
        if self.reference is None:
            passes = [await self.answer_alone(session, p) for p in range(REFERENCE_PASSES)]
            self.reference = Reference("run_start", self.prompts, self.cfg.max_tokens, passes[0], self.digest,
                                       model, str(self.api), passes[1])
            log(f"verify: reference of {len(self.prompts)} prompts answered one at a time, "
                f"{REFERENCE_PASSES} times over")
        for line in reference_lines(reference_summary(self.reference)):
            log(textwrap.fill(f"verify: {line}", 120, subsequent_indent="    "))
        if self.cfg.save_reference:
            self.reference.save(self.cfg.save_reference)
            log(f"verify: reference saved to {self.cfg.save_reference}")

    async def answer_alone(self, session: aiohttp.ClientSession, pass_no: int) -> list[VerifyOutput]:
        """Every prompt answered one request at a time, in order."""
        outputs = []
        for i in range(len(self.prompts)):
            rec = Record(run_id=REFERENCE_RUN, cell=CellKey(0, 1), seq=pass_no * len(self.prompts) + i,
                         phase=Phase.VERIFY)
            out = await post_verify(session, self.base_url, self.api, self.body(i), rec)
            if out is None:
                raise UsageError(f"--verify: the reference request of prompt {i} failed ({rec.error}); the "
                                 "server must answer it before the outputs under load can be compared")
            outputs.append(out)
        return outputs

    def summary(self) -> dict[str, Any] | None:
        """The results' `verify` part (`reference_summary`); None before the reference is known."""
        return reference_summary(self.reference) if self.reference is not None else None

    def jobs(self, jobs: JobList, warmup: int) -> Inserted:
        """The cell's jobs with one verification job per prompt right after the warmup; their sequence
        numbers follow the cell's last job's, and their body names the prompt (`VerifyingSender` sends it)."""
        first = len(jobs)
        extra = [Job(seq=first + i, phase=Phase.VERIFY, body={"verify_prompt": i}) for i in range(len(self.prompts))]
        return Inserted(jobs, extra, warmup)

    async def answer(self, session: aiohttp.ClientSession, index: int, rec: Record) -> Record:
        """Send verification prompt `index`; an answer that came back gets its verdict in `rec.verify`."""
        out = await post_verify(session, self.base_url, self.api, self.body(index), rec)
        if out is not None:
            ref = self.reference
            rec.verify = verdict(index, out, ref.outputs[index] if ref else None, self.cfg.max_tokens,
                                 ref.again_of(index) if ref else None)
        return rec


class VerifyingSender:
    """A cell's sender: verification records go to the verifier, every other one to the transport's sender."""

    def __init__(self, send: SendFn, verifier: Verifier, session: aiohttp.ClientSession):
        self.send = send
        self.verifier = verifier
        self.session = session

    async def __call__(self, body: dict[str, Any], rec: Record) -> Record:
        if rec.phase != Phase.VERIFY:
            return await self.send(body, rec)
        return await self.verifier.answer(self.session, body["verify_prompt"], rec)
