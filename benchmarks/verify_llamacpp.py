"""Are greedy outputs identical with speculative decoding? llama-server (the engine tier's build and tiny model)
without a draft, with the target as its own draft, and with a noisy draft (the same architecture and
tokenizer, the target's weights with Gaussian noise on the output projection: some drafts accepted, some
rejected) and with an unrelated draft (other random weights: every draft rejected), measured with `loadgen --verify` at
concurrency 1, 2 and 4 against one reference: the server without a draft, the prompts answered one at a time.

    PYTHONPATH=$PWD python3 benchmarks/verify_llamacpp.py [--out-dir DIR]

Prints, per server and concurrency, the exact-match fraction, how many outputs differ and where (first
divergence, server tokens), the garbage fraction against the reference (it judges the cell) and judged alone
with its reasons, and the accept length the server reported; then what each run said of its reference (its own
garbage, the server's noise floor). Random weights make text that is noise: where the reference's own output
holds U+FFFD or loops, that check is off for that prompt, so the cells are judged by the default
--max-garbage-fraction 0. The drift check is off: the question here is the outputs, and on a shared machine the
first cell (measured again at the end) is the one a cold server and a busy host slow down.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.llamacpp.server import cache_dir, spec_args, start_server
from tests.llamacpp.tiny_model import VOCAB, tiny_model, write_tiny_llama

CONCURRENCY = "1,2,4"
SLOTS = 4


def draft_model(tag: str, **kw) -> Path:
    """A draft for the tiny model: its architecture and tokenizer, with `kw` for `write_tiny_llama` (other
    random weights: `seed=1`; the target's weights with a noisy output projection: `output_noise=…`)."""
    path = cache_dir() / "tiny-models" / f"llama-e64-l2-{Path(VOCAB).stem}-{tag}.gguf"
    if not path.exists():
        partial = path.with_suffix(".partial")
        write_tiny_llama(partial, cache_dir() / "models" / VOCAB, **kw)
        partial.replace(path)
    return path


def measure(name: str, args: list[str], out: Path, reference: Path, save: bool) -> dict:
    server = start_server(out, args, name=name)
    try:
        flags = ["--verify-save-reference" if save else "--verify-reference", str(reference)]
        proc = subprocess.run(
            [sys.executable, "-m", "loadgen", "--url", server.url, "--concurrency", CONCURRENCY, "--contexts", "60",
             "--max-tokens", "32", "--requests-per-cell", "8", "--verify", "--verify-max-tokens", "64",
             "--drift-check", "off", "--out", str(out / f"{name}.json"), "--force", *flags],
            capture_output=True, text=True, timeout=900, check=False)
    finally:
        server.stop()
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{name}: loadgen exited {proc.returncode}: {proc.stderr[-2000:]}")
    said = [line for line in proc.stderr.splitlines() if line.startswith(("verify:", "    "))]
    return json.loads((out / f"{name}.json").read_text()) | {"said": said, "exit": proc.returncode}


def row(name: str, cell: dict) -> str:
    part = cell["correctness"]
    div = part.get("first_divergence_tokens") or {}
    alone = ", ".join(f"{v['count']} {r}" for r, v in (part.get("absolute_garbage") or {}).items())
    accept = (cell.get("accept_length") or {}).get("value")
    return (f"{name:<14} {cell['concurrency']:>4} {part['checked']:>7} {part['exact_match_fraction']:>6.2f} "
            f"{part['diverged']:>8} {str(div.get('min', '-')):>7} {str(div.get('p50', '-')):>7} "
            f"{part['garbage_fraction']:>7.2f} {part['absolute_garbage_fraction']:>6.2f} "
            f"{accept if accept is None else round(accept, 2)!s:>6}  {cell['status']:<6} {part['unit']:<5} {alone}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out-dir", type=Path, default=None)
    a = p.parse_args()
    out = a.out_dir or Path(tempfile.mkdtemp(prefix="verify-llamacpp-"))
    out.mkdir(parents=True, exist_ok=True)
    model = tiny_model()
    noisy, unrelated = draft_model("noise0.15", output_noise=0.15), draft_model("seed1", seed=1)
    reference = out / "no-draft.verify-reference.json"
    runs = {"no draft": (spec_args(model, None, slots=SLOTS), True),
            "draft=target": (spec_args(model, model, slots=SLOTS), False),
            "noisy draft": (spec_args(model, noisy, slots=SLOTS), False),
            "unrelated": (spec_args(model, unrelated, slots=SLOTS), False)}
    print(f"{'server':<14} {'conc':>4} {'checked':>7} {'exact':>6} {'diverged':>8} {'div min':>7} {'div p50':>7} "
          f"{'garbage':>7} {'alone':>6} {'accept':>6}  {'status':<6} {'unit':<5} garbage alone")
    said = {}
    for name, (args, save) in runs.items():
        doc = measure(name.replace(" ", "-").replace("=", "-"), args, out, reference, save)
        said[name] = (doc["exit"], doc["said"])
        for cell in doc["cells"]:
            print(row(name, cell))
    for name, (code, lines) in said.items():
        print(f"{name} (exit {code}):")
        print("\n".join(f"  {line}" for line in lines))
    print(f"results and server logs: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
