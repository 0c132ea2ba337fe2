#!/bin/bash
# One call on the H200 machine (via the device tool): the GPU activity check of benchmarks/h200_gpu_activity.py.
# Carried wheels (.whl-gpu/: nvidia-ml-py, prometheus-client) are installed only where the image lacks them.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if ! python3 -c "import pynvml, prometheus_client" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl-gpu/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
{ nvidia-smi; python3 -c "import pynvml, torch; print('pynvml', pynvml.__file__, 'torch', torch.__version__)"; } 2>&1 | tee "$OUT/env.txt"
nvidia-smi --query-gpu=utilization.gpu,clocks.sm,clocks.max.sm,power.draw,power.limit,clocks_event_reasons.active --format=csv 2>&1 | tee -a "$OUT/env.txt"
timeout 200 python3 benchmarks/h200_gpu_activity.py --seconds 12 --interval 0.25 2>&1 | tee "$OUT/h200_gpu_activity.log"
