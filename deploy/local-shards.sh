#!/bin/sh
# N loadgen shards on this host (or, with the same arguments and START_AT, one per host), then one merged
# results file. Extra arguments are loadgen's run options, the same for every shard.
#   deploy/local-shards.sh N OUT_DIR --url URL --concurrency 512,1024 --contexts 1024 --duration-per-cell 60 \
#       --cell-period 120
set -eu
N=$1
OUT=$2
shift 2
mkdir -p "$OUT"
START_AT=$(( $(date +%s) + ${LEAD_SECONDS:-10} ))
RUN_ID=${RUN_ID:-shards-$(date -u +%Y%m%dt%H%M%S)}
i=0
pids=""
while [ "$i" -lt "$N" ]; do
  loadgen "$@" --shard "$i/$N" --run-id "$RUN_ID" --start-at "$START_AT" --out "$OUT/shard-$i.json" \
    > "$OUT/shard-$i.log" 2>&1 &
  pids="$pids $!"
  i=$((i + 1))
done
status=0
for pid in $pids; do wait "$pid" || status=$?; done
loadgen merge "$OUT/merged.json" "$OUT"/shard-*.json
exit "$status"
