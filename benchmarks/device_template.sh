#!/bin/bash
# One call on a quiet many-core host (the device tool): the client's cost against the raw reader in earlier trees
# and this one, side by side.
#   git archive -o .tree-before.tar <commit>   (one .tree-NAME.tar a tree; /.tree-*.tar in .git/info/exclude)
#   then, carrying them: bash benchmarks/device_template.sh [ROUNDS]
# Each round runs client_overhead.py (burst and paced, c=32 and c=128, loadgen beside the raw reader in the same
# run, each burst measurement after 0.5 s of warmup) in every tree, this tree's harness, server and raw reader in
# each, the order turned each round; then burst_breakdown.py (in process, records kept, each tree's own).
# Prints each figure's median over rounds of loadgen ÷ raw (range); every run's output is under $OUT/runs.
set -u
OUT=${OUT:-/tmp/out}; ROUNDS=${1:-5}; RUNS=$OUT/runs  # under $OUT: a call cut short still brings back its rounds
mkdir -p "$RUNS"
TREES=""
for tar in .tree-*.tar; do
  name=${tar#.tree-}; name=${name%.tar}
  mkdir -p "/tmp/trees/$name" && tar -xf "$tar" -C "/tmp/trees/$name" || exit 1
  # every tree runs this tree's harness, server and raw reader (they read any earlier loadgen): only loadgen differs
  cp benchmarks/client_overhead.py benchmarks/fast_sse_server.py benchmarks/raw_reader.py "/tmp/trees/$name/benchmarks/"
  TREES="$TREES $name"
done
TREES="$TREES after"; REVERSED=$(echo $TREES | tr ' ' '\n' | tac | tr '\n' ' ')
if ! python3 -c "import orjson" 2>/dev/null; then  # carry .whl/orjson-*.whl where orjson is not installed
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
{ nproc; python3 --version; python3 -c "import aiohttp, uvloop, orjson; print('aiohttp', aiohttp.__version__, 'uvloop', uvloop.__version__, 'orjson', orjson.__version__)"; } 2>&1 | tee "$OUT/env.txt"
AFTER=$PWD
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then order=$TREES; else order=$REVERSED; fi
  for t in $order; do
    if [ $t = after ]; then cd "$AFTER"; else cd "/tmp/trees/$t"; fi
    timeout 100 python3 benchmarks/client_overhead.py --mode burst --concurrency 32,128 --reps 1 --seconds 2 \
      --clients raw,loadgen --json "$RUNS/burst-$t-$r.json" > "$RUNS/burst-$t-$r.txt" 2>&1
    timeout 100 python3 benchmarks/client_overhead.py --mode paced --paced-concurrency 32,128 --reps 1 \
      --paced-seconds 4 --clients raw,loadgen --json "$RUNS/paced-$t-$r.json" > "$RUNS/paced-$t-$r.txt" 2>&1
    timeout 60 python3 benchmarks/burst_breakdown.py --reps 1 --stages raw,kept --responses 200 \
      > "$RUNS/breakdown-$t-$r.txt" 2>&1
    echo "$(date +%T) round $r $t load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
cd "$AFTER"
python3 - "$RUNS" $TREES <<'PY' | tee "$OUT/summary.txt"
import glob, json, re, statistics, sys
out, trees = sys.argv[1], sys.argv[2:]
def med(xs):
    return f"{statistics.median(xs):.2f}x ({min(xs):.2f}-{max(xs):.2f}, n={len(xs)})" if xs else "-"
for mode in ("burst", "paced"):
    for tree in trees:
        by = {}
        for f in sorted(glob.glob(f"{out}/{mode}-{tree}-*.json")):
            for row in json.load(open(f))["rows"]:
                by.setdefault(row["concurrency"], []).append(row)
        for c, rows in sorted(by.items()):
            raw = statistics.median(r["raw"]["cpu_us_per_chunk"] for r in rows)
            lg = statistics.median(r["loadgen"]["cpu_us_per_chunk"] for r in rows)
            util = statistics.median(r["loadgen"]["cpu_util"] for r in rows)
            print(f"{mode} c={c:<4} {tree:8} loadgen/raw {med([r['ratio'] for r in rows])}  raw {raw:.2f} us  "
                  f"loadgen {lg:.2f} us a chunk  loadgen CPU {util:.0%}")
for tree in trees:
    ratios = []
    for f in sorted(glob.glob(f"{out}/breakdown-{tree}-*.txt")):
        text = open(f).read()
        raw = re.search(r"^\s*raw\s+([\d.,]+)", text, re.M); kept = re.search(r"^\s*kept\s+([\d.,]+)", text, re.M)
        if raw and kept:
            ratios.append(float(kept.group(1).replace(",", "")) / float(raw.group(1).replace(",", "")))
    print(f"in process (burst_breakdown, kept/raw) {tree:8} {med(ratios)}")
PY
