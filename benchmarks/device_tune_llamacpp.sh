#!/usr/bin/env bash
# `loadgen tune` against a full `loadgen sweep` on one NVIDIA GPU (benchmarks/tune_llamacpp.py): llama-server built
# with CUDA, the verdict's 2048-wide target (F32, 5.5 GB) and its one-block draft, over draft budget 0/2/4/8 × slots
# (-np) 1/4 at concurrency 1, 2 and 4 (8 configurations, 24 requests a cell, 64 output tokens). The sweep runs first,
# then the tune; at DEADLINE_S each is interrupted as Ctrl-C would, so calling the script again on the warm machine
# (the build, models and both folders kept in /tmp) resumes where it stopped. From the repository root it reads
# .dev/llama.cpp-src.tar.xz and .whl/ (benchmarks/device_verdict_llamacpp.sh says how they are made).
# Writes under $OUT: device.txt, build.log, models.log, tune.log (both answers side by side and both costs) and
# tune-cuda.tar.gz (/tmp/tune-cuda: the tune's folder and the sweep's).
# Environment: REQUESTS (24), SLOTS (1,4), DEADLINE_S (560 s of the command's 600).
set -uo pipefail
out="${OUT:?where results go}"
shape=(--n-embd 2048 --n-ff 5632 --n-head 16 --n-layer 24)
deadline_s="${DEADLINE_S:-560}"
SECONDS=0
stamp() { echo "[${SECONDS}s] $*"; }

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv >"$out/device.txt" 2>&1
nproc >>"$out/device.txt"
source benchmarks/device_llamacpp_build.sh

stamp "sweep, then tune ($((deadline_s - SECONDS)) s left)"
mkdir -p /tmp/tune-cuda
python3 benchmarks/tune_llamacpp.py --out-dir /tmp/tune-cuda/tune --sweep-dir /tmp/tune-cuda/sweep --sweep-first \
  "${shape[@]}" -ngl 99 --slots "${SLOTS:-1,4}" --requests "${REQUESTS:-24}" --deadline-s $((deadline_s - SECONDS)) \
  2>&1 | tee "$out/tune.log"
rc=${PIPESTATUS[0]}
stamp "tune_llamacpp.py exited $rc" | tee -a "$out/tune.log"
tar -czf "$out/tune-cuda.tar.gz" -C /tmp tune-cuda
exit "$rc"
