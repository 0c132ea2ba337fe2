#!/bin/bash
# One call on a many-core host (the 16-core H200 machine, via the device tool): the client benchmarks on a
# quiet machine, then `loadgen --workers N` scaling against a 6-process fast server. Writes to $OUT.
#   bash benchmarks/device_run.sh      (needs .whl/orjson-*.whl carried when orjson is not installed)
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if ! python3 -c "import orjson" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
{ nproc; python3 --version; python3 -c "import aiohttp, uvloop, orjson, numpy; print('aiohttp', aiohttp.__version__, 'uvloop', uvloop.__version__, 'orjson', orjson.__version__)"; } 2>&1 | tee "$OUT/env.txt"
timeout 130 python3 benchmarks/client_overhead.py --mode burst,paced --concurrency 32,1024 --paced-concurrency 128 \
  --reps 3 --seconds 1.5 --paced-seconds 3 --json "$OUT/overhead.json" 2>&1 | tee "$OUT/overhead.log"
timeout 170 python3 benchmarks/client_overhead.py --mode none --scaling-workers 1,2,4,8 --scaling-concurrency 1024 \
  --server-procs 6 --scaling-seconds 5 --reps 3 --events 512 --json "$OUT/scaling.json" 2>&1 | tee "$OUT/scaling.log"
