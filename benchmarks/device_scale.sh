#!/bin/bash
# One call on the 16-core H200 host (the device tool): `--workers` scaling pinned to cores 0-7 against the
# burst server on cores 8-15, 10,000 concurrent streams, and loadgen's CPU per chunk beside the raw reader's;
# with MAIN=dir (a checkout of the version before), its scaling and CPU per chunk side by side.
#   bash benchmarks/device_scale.sh      (installs .whl/*.whl where orjson or asyncio-throttle are missing)
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if ! python3 -c "import orjson, asyncio_throttle" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
SITE=${PYTHONPATH:-}
export PYTHONPATH=${SITE:+$SITE:}$PWD PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
{ nproc; python3 --version; ulimit -n; ulimit -Hn; python3 -c "import aiohttp, uvloop, orjson, numpy; print('aiohttp', aiohttp.__version__, 'uvloop', uvloop.__version__, 'orjson', orjson.__version__, 'numpy', numpy.__version__)"; } 2>&1 | tee "$OUT/env.txt"
timeout 200 python3 benchmarks/scale.py workers --workers 1,2,4,8,auto --client-cpus 0-7 --server-cpus 8-15 \
  --concurrency 1024 --events 512 --seconds 8 --json "$OUT/workers.json" 2>&1 | tee "$OUT/workers.log"
timeout 90 python3 benchmarks/scale.py streams --streams 10000 --tokens 16 --json "$OUT/streams.json" 2>&1 | tee "$OUT/streams.log"
overhead() {  # $1: label; the rest: how to run python
  timeout 60 "${@:2}" benchmarks/client_overhead.py --mode burst,paced --concurrency 32 --paced-concurrency 128 \
    --clients raw,loadgen --reps 1 --seconds 1.5 --paced-seconds 6 2>&1 | grep -E "^(burst|paced) " | sed "s/^/$1 /"
}
for rep in 1 2 3; do
  overhead now python3 | tee -a "$OUT/overhead.log"
  if [ -n "${MAIN:-}" ]; then (cd "$MAIN" && PYTHONPATH=${SITE:+$SITE:}$MAIN_CODE overhead before python3) | tee -a "$OUT/overhead.log"; fi
done
if [ -n "${MAIN:-}" ]; then
  (cd "$MAIN" && PYTHONPATH=${SITE:+$SITE:}$MAIN_CODE timeout 100 python3 benchmarks/scale.py workers --workers 1,8 \
    --client-cpus 0-7 --server-cpus 8-15 --concurrency 1024 --events 512 --seconds 8 --json "$OUT/workers-before.json") \
    2>&1 | tee "$OUT/workers-before.log"
fi
