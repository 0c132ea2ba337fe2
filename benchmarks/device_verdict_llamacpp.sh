#!/usr/bin/env bash
# The llama-server draft-budget verdict (benchmarks/verdict_llamacpp.py) on one NVIDIA GPU: builds llama-server with
# CUDA from the llama.cpp that scripts/build-llama-server.sh builds for the CPU, writes a 2048-wide target (F32,
# 5.5 GB), measures with llama-batched-bench what a step of it costs against the tokens in it (on an H200 it barely
# grows: 3.9 ms at 4 tokens, 4.3 ms at 36, memory-bound), then runs the sweep with every layer offloaded.
# Everything in one command of at most 10 minutes on a 16-core H100/H200 machine without network access (measured
# on an H200: 314 s, of which the build 250 s, the sweep 56 s). It reads, from the repository root:
#   .dev/llama.cpp-src.tar.xz  vendor/llama.cpp of the llama-cpp-python 0.3.36 sdist, less its docs, tests, media,
#                              benches, other GPU backends and every model but ggml-vocab-llama-spm.gguf
#   .whl/                      cp312 manylinux wheels of loadgen's runtime dependencies (pyproject.toml)
#   (both ignored through .git/info/exclude; the source is 5.5 MB as .tar.xz, the wheels 7.7 MB: `pip download
#   --no-deps --no-binary :all: llama-cpp-python==0.3.36`, and `pip download --no-deps --only-binary=:all:
#   --python-version 3.12 --platform manylinux2014_x86_64 ... -d .whl aiohttp orjson uvloop prometheus-client
#   asyncio-throttle` with aiohttp's own dependencies named)
# Writes under $OUT: device.txt, build.log, models.log, bench.txt, verdict.log and verdict-cuda.tar.gz (the
# sweep's results folder, the report and compare.json inside); make the report from it where matplotlib runs.
# Environment: N_EMBD (2048), N_FF (5632), N_HEAD (16), N_LAYER (24), REQUESTS (24), DEADLINE_S (570: the sweep
# is stopped so that the results still come back within the command's 600 s).
set -uo pipefail
out="${OUT:?where results go}"
n_embd="${N_EMBD:-2048}" n_ff="${N_FF:-5632}" n_head="${N_HEAD:-16}" n_layer="${N_LAYER:-24}"
deadline_s="${DEADLINE_S:-570}"
shape=(--n-embd "$n_embd" --n-ff "$n_ff" --n-head "$n_head" --n-layer "$n_layer")
SECONDS=0
stamp() { echo "[${SECONDS}s] $*"; }

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv >"$out/device.txt" 2>&1
nproc >>"$out/device.txt"
# the wheels, llama-server built with CUDA and the models (the layout scripts/build-llama-server.sh leaves, where
# benchmarks/llamacpp_restart.py and tests/llamacpp look: the restart script finds the CUDA binary there)
source benchmarks/device_llamacpp_build.sh

# a step's cost against its tokens: 4 sequences decoding one token each (no draft at c=4) up to 36 (4 x 9, a
# full n_max 8 verify at c=4), on the same target
stamp "llama-batched-bench"
timeout 90 /tmp/llama-build/bin/llama-batched-bench -m "$target" -ngl 99 -c 4096 -npp 60 -ntg 32 -npl 1,4,12,20,36 \
  >"$out/bench.txt" 2>/tmp/bench.err || tail -n 30 /tmp/bench.err >>"$out/bench.txt"

stamp "sweep ($((deadline_s - SECONDS)) s left)"
timeout -k 5 $((deadline_s - SECONDS)) python3 benchmarks/verdict_llamacpp.py --out-dir /tmp/verdict-cuda \
  "${shape[@]}" -ngl 99 --requests "${REQUESTS:-24}" 2>&1 | tee "$out/verdict.log"
swept=${PIPESTATUS[0]}
stamp "sweep exited $swept" | tee -a "$out/verdict.log"
tar -czf "$out/verdict-cuda.tar.gz" -C /tmp verdict-cuda
exit "$swept"
