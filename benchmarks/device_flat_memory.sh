#!/bin/bash
# The 16-core call of docs/performance.md, *Memory* and *The work after the load*: before and after side by side,
# each benchmark on its own cores. TREES: a tarball holding base/ and new/ (two source trees) and a real run's
# JSONL r640.requests.jsonl (the summary's records); wheels the host lacks in wheels/ beside it; results go to $OUT.
#   memory: an ~8-minute cell (465 s) at c=128, ~170 requests/s, base and new at once (cores 2-3 and 4-5)
#   CPU:    whole_run.py (c=32, 128 and 640 requests), client_overhead.py (burst, c=32), summary_cost.py (100k)
set -u
TREES=${1:-build/flat_memory/trees.tgz}
SECONDS_CELL=${2:-465}
W=/tmp/flat_memory && rm -rf $W && mkdir -p $W && tar xzf "$TREES" -C $W
nproc; python3 --version; uptime
WHEELS=$(dirname "$TREES")/wheels  # the packages the host lacks, for its Python (no network there)
[ -d "$WHEELS" ] && python3 -m pip install -q --no-index --find-links "$WHEELS" orjson uvloop prometheus_client \
  asyncio-throttle 2>&1 | tail -2
python3 -c "import numpy, aiohttp, orjson, uvloop, prometheus_client; print(numpy.__version__, aiohttp.__version__)" \
  || exit 3
command -v taskset > /dev/null || taskset() { shift 2; "$@"; }
for v in base new; do
  (cd $W/$v && taskset -c $([ $v = base ] && echo 2,3 || echo 4,5) python3 benchmarks/memory_growth.py \
     --seconds "$SECONDS_CELL" --events 30 --json "$OUT/mem_$v.json" > "$OUT/mem_$v.log" 2>&1) &
done
for v in base new; do
  (cd $W/$v && taskset -c 8,9 python3 benchmarks/whole_run.py --reps 5 --json "$OUT/whole_$v.json" \
     > "$OUT/whole_$v.log" 2>&1)
  (cd $W/$v && taskset -c 10,11 python3 benchmarks/client_overhead.py --mode burst --concurrency 32 --reps 5 \
     --seconds 2 --json "$OUT/overhead_$v.json" > "$OUT/overhead_$v.log" 2>&1)
  (cd $W/$v && taskset -c $([ $v = base ] && echo 12 || echo 13) python3 benchmarks/summary_cost.py $W/r640.requests.jsonl --requests 100000 \
     > "$OUT/summary_$v.log" 2>&1) &
done
wait
uptime
tail -n 4 "$OUT"/*.log
