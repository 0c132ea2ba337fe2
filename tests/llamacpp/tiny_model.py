"""A tiny llama GGUF with random weights and a real tokenizer, written with gguf-py.

The tokenizer (every `tokenizer.*` key) is copied from one of llama.cpp's vocab-only GGUF files
(`models/ggml-vocab-*.gguf`), so prompts tokenize as they would on a real model of that family. The weights are
random: the text it generates is noise, but with a fixed seed and greedy sampling it is deterministic, and a
model used as its own draft has every draft token accepted (accept length = n_max + 1).

Run as a script to write one: `python -m tests.llamacpp.tiny_model OUT.gguf [--vocab PATH]`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

VOCAB = "ggml-vocab-llama-bpe.gguf"  # llama 3's 128k BPE vocabulary, as in the captured samples
# llama's 32k SentencePiece vocabulary: a server loads it in a fifth of the time, for tests that do not size prompts
FAST_VOCAB = "ggml-vocab-llama-spm.gguf"


def gguf_module():
    """gguf-py: the installed package (the test extra), else the copy kept beside the built llama-server."""
    try:
        import gguf
    except ImportError:
        from tests.llamacpp.server import cache_dir
        sys.path.insert(0, str(cache_dir() / "gguf-py"))
        import gguf
    return gguf


def write_tiny_llama(out: Path, vocab: Path, n_embd: int = 64, n_layer: int = 2, n_head: int = 4,
                     n_ff: int = 128, n_ctx_train: int = 2048, seed: int = 0, output_noise: float = 0.0) -> Path:
    """Write a llama-architecture model of `n_layer` blocks (F32: 17 MB with the 32k llama-spm vocab, 74 MB with
    the 128k llama-bpe one). `output_noise` > 0 adds that much Gaussian noise (its own seed) to the output
    projection: the same model, slightly wrong, as a noisy draft of the one without noise."""
    gguf = gguf_module()
    reader = gguf.GGUFReader(str(vocab))
    writer = gguf.GGUFWriter(str(out), "llama")
    writer.add_name("tiny-random-llama")
    writer.add_context_length(n_ctx_train)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head)
    writer.add_rope_dimension_count(n_embd // n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    n_vocab = 0
    for field in reader.fields.values():
        if not field.name.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        value = field.contents()
        if field.name == "tokenizer.ggml.tokens":
            n_vocab = len(value)
        writer.add_key_value(field.name, value, vtype, sub_type=sub)
    writer.add_vocab_size(n_vocab)
    rng = np.random.default_rng(seed)

    def tensor(name: str, *shape: int, scale: float = 0.02) -> None:
        writer.add_tensor(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    tensor("token_embd.weight", n_vocab, n_embd)
    for i in range(n_layer):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        for part in ("q", "k", "v", "output"):
            tensor(f"blk.{i}.attn_{part}.weight", n_embd, n_embd)
        tensor(f"blk.{i}.ffn_gate.weight", n_ff, n_embd)
        tensor(f"blk.{i}.ffn_up.weight", n_ff, n_embd)
        tensor(f"blk.{i}.ffn_down.weight", n_embd, n_ff)
    writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    output = rng.standard_normal((n_vocab, n_embd))
    if output_noise:
        output += np.random.default_rng(seed + 1000).standard_normal(output.shape) * output_noise
    writer.add_tensor("output.weight", output.astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def tiny_model(vocab: str = VOCAB) -> Path:
    """The tiny model with `vocab`'s tokenizer, written once into the llama-server cache folder (gguf-py's reader
    is slow on a large vocabulary: seconds for llama-spm, ~20 s for llama-bpe)."""
    from tests.llamacpp.server import cache_dir
    path = cache_dir() / "tiny-models" / f"llama-e64-l2-{Path(vocab).stem}.gguf"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        write_tiny_llama(partial, cache_dir() / "models" / vocab)
        partial.replace(path)
    return path


def main() -> None:
    from tests.llamacpp.server import cache_dir
    p = argparse.ArgumentParser(description="write a tiny random-weight llama GGUF")
    p.add_argument("out", type=Path)
    p.add_argument("--vocab", type=Path, default=None, help=f"vocab-only GGUF (default: the cached {VOCAB})")
    args = p.parse_args()
    write_tiny_llama(args.out, args.vocab or cache_dir() / "models" / VOCAB)
    print(args.out)


if __name__ == "__main__":
    main()
