"""The verdict across configurations on a real engine: llama-server (the engine tier's CPU build) swept over its
draft budget — no draft, `--spec-draft-n-max` 2, 4 and 8 — by `loadgen sweep`, then `loadgen report` and
`loadgen compare --format json`.

    python3 benchmarks/verdict_llamacpp.py --out-dir DIR     # ~6 minutes on 2 cores
    python3 benchmarks/verdict_llamacpp.py --out-dir DIR --n-embd 2048 --n-ff 5632 --n-head 16 -ngl 99
                                                             # a CUDA build: benchmarks/device_verdict_llamacpp.sh

Writes in DIR: sweep.toml (its `reconfigure` restarts llama-server through benchmarks/llamacpp_restart.py),
the sweep's results, report.html, plots/, compare.json; the sweep's own summary and verdict are printed.
Matrix: 60-token prompts, concurrency 1, 2 and 4 (4 slots, one llama-server thread), 64 output tokens, 24
requests per cell.

The models (random weights, llama architecture, llama's 32k SentencePiece tokenizer, F32, written once into the
llama-server cache folder):
- target: 128-wide, 24 blocks with a 4096-wide FFN. Block 0 writes to the residual stream at full scale, blocks
  1-23 at `TAIL_SCALE` (their attention output and FFN down projections scaled), so they nudge the next-token
  choice rather than decide it.
- draft: the target's embedding, block 0 and output projection, nothing else: cheap next to the target, and
  sometimes wrong (it misses blocks 1-23). Its draft tokens are accepted about 60 / 44 / 27 % of the time at
  n_max 2 / 4 / 8 (accept length 2.2 / 2.7 / 3.2 of at most 3 / 5 / 9).
How the sizes were chosen (2 cores, decode tok/s of one greedy request of 64 tokens at a time, two rounds):
12 blocks: no draft 90-107, n_max 2 / 4 / 8 89-107 / 109-112 / 109-118 (the draft costs about as much as it
saves); 18 blocks: 69-73, 76-88 / 75-84 / 65-69; 24 blocks: 40-45, 55-67 / 53-65 / 48-52 (a draft pays at
concurrency 1, and 8 draft tokens cost more than they bring). On the 12-block target a tail scale of 0.015 made a
draft right 86 % of the time at n_max 2, 0.03 72 %.
The machine is shared: of three sweeps of the 12-block target, one named n_max8 the winner at concurrency 1
(+30 % ± 9.5 %) and one no_draft (+22 % ± 13 %), both "beyond noise" (a cell's interval holds the noise between
its requests, not the host's load between configurations measured minutes apart), the third tied n_max8 and
n_max4; `loadgen compare DIR1 DIR2 DIR3` of the three tied them all. Run it twice and compare both folders before
believing a margin of a few tens of percent.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # runnable as a script: tests.llamacpp writes the models and knows the cache folder

from tests.llamacpp.server import cache_dir  # noqa: E402
from tests.llamacpp.tiny_model import FAST_VOCAB, gguf_module  # noqa: E402

RESTART = REPO / "benchmarks" / "llamacpp_restart.py"
N_EMBD, N_FF, N_LAYER, N_HEAD = 128, 4096, 24, 4
TAIL_SCALE = 0.03
BUDGETS = (0, 2, 4, 8)
SLOTS = 4


def write_llama(out: Path, vocab: Path, n_layer: int, n_embd: int = N_EMBD, n_ff: int = N_FF,
                n_head: int = N_HEAD, tail_scale: float = TAIL_SCALE) -> Path:
    """The first `n_layer` blocks of the target (module docstring). Each block's weights come from its own seed,
    so the draft (n_layer=1) holds exactly the target's block 0, embedding and output projection."""
    gguf = gguf_module()
    reader = gguf.GGUFReader(str(vocab))
    w = gguf.GGUFWriter(str(out), "llama")
    w.add_name(f"verdict-llama-e{n_embd}-l{n_layer}")
    w.add_context_length(2048)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    n_vocab = 0
    for field in reader.fields.values():
        if not field.name.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        value = field.contents()
        if field.name == "tokenizer.ggml.tokens":
            n_vocab = len(value)
        w.add_key_value(field.name, value, vtype, sub_type=field.types[-1] if vtype == gguf.GGUFValueType.ARRAY
                        else None)
    w.add_vocab_size(n_vocab)
    shared = np.random.default_rng(0)
    w.add_tensor("token_embd.weight", (shared.standard_normal((n_vocab, n_embd)) * 0.02).astype(np.float32))
    output = shared.standard_normal((n_vocab, n_embd)).astype(np.float32)
    for i in range(n_layer):
        rng, residual = np.random.default_rng(100 + i), 1.0 if i == 0 else tail_scale
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        for name, shape, scale in ((f"blk.{i}.attn_q.weight", (n_embd, n_embd), 1.0),
                                   (f"blk.{i}.attn_k.weight", (n_embd, n_embd), 1.0),
                                   (f"blk.{i}.attn_v.weight", (n_embd, n_embd), 1.0),
                                   (f"blk.{i}.attn_output.weight", (n_embd, n_embd), residual),
                                   (f"blk.{i}.ffn_gate.weight", (n_ff, n_embd), 1.0),
                                   (f"blk.{i}.ffn_up.weight", (n_ff, n_embd), 1.0),
                                   (f"blk.{i}.ffn_down.weight", (n_embd, n_ff), residual)):
            w.add_tensor(name, (rng.standard_normal(shape) * 0.02 * scale).astype(np.float32))
    w.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    w.add_tensor("output.weight", output)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


def model(n_layer: int, n_embd: int = N_EMBD, n_ff: int = N_FF, n_head: int = N_HEAD, of: int = N_LAYER) -> Path:
    """The target (`of` blocks) or the draft (1 block), written once into the llama-server cache folder."""
    heads = "" if n_head == N_HEAD else f"-h{n_head}"  # the CPU default keeps its file name
    path = cache_dir() / "tiny-models" / f"verdict-e{n_embd}-f{n_ff}{heads}-l{n_layer}of{of}-t{TAIL_SCALE:g}.gguf"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        write_llama(partial, cache_dir() / "models" / FAST_VOCAB, n_layer, n_embd, n_ff, n_head)
        partial.replace(path)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config_name(n_max: int, slots: int, several: bool) -> str:
    """no_draft / n_max4, with _np1 (the server's slots) when the file has several slot counts."""
    return ("no_draft" if n_max == 0 else f"n_max{n_max}") + (f"_np{slots}" if several else "")


def sweep_toml(out: Path, target: Path, draft: Path, port: int, requests: int, max_tokens: int,
               slots: tuple[int, ...] = (SLOTS,)) -> str:
    """The sweep file: one configuration per draft budget (× slot count, `-np`), each a restart of llama-server."""
    log, pidfile = out / "llama-server.log", out / "llama-server.pid"
    argv = ["{python}", str(RESTART), "--pidfile", str(pidfile), "--log", str(log), "--port", str(port),
            "--model", str(target), "--draft", str(draft), "--draft-n-max", "{n_max}", "--slots", "{slots}"]
    configs = "".join(f'\n[[configs]]\nname = "{config_name(n, np, len(slots) > 1)}"\nn_max = {n}\nslots = {np}\n'
                      f"speculative = {'true' if n else 'false'}\n" for np in slots for n in BUDGETS)
    quoted = ", ".join(f'"{a}"' for a in argv)
    return f"""# written by benchmarks/verdict_llamacpp.py: llama-server's draft budget, restarted per configuration
name = "verdict-llamacpp"
reconfigure = [{quoted}]
diagnostics = ["tail", "-n", "60", "{log}"]

[server]
url = "http://127.0.0.1:{port}"

[readiness]
timeout_s = 60
poll_s = 0.2
successes = 2

# llama-server serves no /server_info: loadgen reads the draft settings of the local process
[expect]
speculative = "{{speculative}}"

[matrix]
contexts = [60]
concurrency = [1, 2, 4]
max_tokens = {max_tokens}
requests_per_cell = {requests}
warmup = 2

[telemetry]
accept_log_cmd = "tail -n 0 -F {log}"
{configs}"""


def loadgen(*args: str, stdout=None) -> int:
    return subprocess.run([sys.executable, "-m", "loadgen", *args], cwd=REPO, stdout=stdout, check=False).returncode


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    p.add_argument("--out-dir", type=Path, default=None, help="results folder (default: a new temporary one); "
                   "its cells are measured again on every run")
    p.add_argument("--requests", type=int, default=24, help="requests per cell (default 24)")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--n-embd", type=int, default=N_EMBD, help=f"target and draft width (default {N_EMBD})")
    p.add_argument("--n-ff", type=int, default=N_FF, help=f"FFN width (default {N_FF})")
    p.add_argument("--n-head", type=int, default=N_HEAD, help=f"attention heads (default {N_HEAD})")
    p.add_argument("--n-layer", type=int, default=N_LAYER, help=f"target blocks (default {N_LAYER})")
    p.add_argument("--n-gpu-layers", "-ngl", default=None, help="layers of target and draft offloaded to the GPU of "
                   "a GPU build (llama-server's LLAMA_ARG_N_GPU_LAYERS[_DRAFT]); default: the server's own")
    p.add_argument("--models-only", action="store_true", help="write the two models and exit")
    a = p.parse_args()
    shape = {"n_embd": a.n_embd, "n_ff": a.n_ff, "n_head": a.n_head, "of": a.n_layer}
    target, draft = model(a.n_layer, **shape), model(1, **shape)
    if a.models_only:
        print(f"target {target}\ndraft {draft}")
        return 0
    if a.n_gpu_layers is not None:
        # the restart script builds llama-server's argv itself: the server reads these from the environment it
        # inherits through the sweep's reconfigure
        os.environ["LLAMA_ARG_N_GPU_LAYERS"] = os.environ["LLAMA_ARG_N_GPU_LAYERS_DRAFT"] = str(a.n_gpu_layers)
    out = (a.out_dir or Path(tempfile.mkdtemp(prefix="verdict-llamacpp-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    sweep = out / "sweep.toml"
    sweep.write_text(sweep_toml(out, target, draft, free_port(), a.requests, a.max_tokens))
    t0 = time.monotonic()
    try:
        swept = loadgen("sweep", str(sweep), "--out-dir", str(out), "--force")
    finally:
        subprocess.run([sys.executable, str(RESTART), "--pidfile", str(out / "llama-server.pid"), "--stop"],
                       check=False)
    print(f"sweep exited {swept} after {time.monotonic() - t0:.0f} s")
    loadgen("report", str(out), "--html", str(out / "report.html"), "--plots", str(out / "plots"),
            stdout=subprocess.DEVNULL)
    with open(out / "compare.json", "wb") as f:
        loadgen("compare", str(out), "--format", "json", stdout=f)
    print(f"results: {out} (report.html, plots/, compare.json)")
    return swept


if __name__ == "__main__":
    sys.exit(main())
