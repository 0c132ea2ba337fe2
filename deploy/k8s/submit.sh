#!/bin/sh
# Start N loadgen shards against one server on Kubernetes, wait for them, merge their results.
#   deploy/k8s/submit.sh URL [SHARDS] [LEAD_SECONDS]
# e.g. deploy/k8s/submit.sh http://sglang.llm.svc:30000 4 90
# LEAD_SECONDS (default 90) must cover scheduling, image pull and loadgen's setup on every node: shards that
# are not ready by START_AT start late, and `loadgen merge` warns that their windows overlap too little.
set -eu
URL=$1
SHARDS=${2:-4}
LEAD=${3:-90}
RUN_ID=loadgen-$(date -u +%Y%m%dt%H%M%S)
START_AT=$(( $(date +%s) + LEAD ))
export URL SHARDS RUN_ID START_AT
here=$(dirname "$0")
# only our variables are substituted; the $VARS inside the pods' shell commands stay for the pods
vars='${URL} ${SHARDS} ${RUN_ID} ${START_AT}'
envsubst "$vars" < "$here/loadgen-shards.yaml" | kubectl apply -f -
echo "run $RUN_ID: $SHARDS shards start at $(date -u -d @"$START_AT" 2>/dev/null || echo "$START_AT")"
kubectl wait --for=condition=complete --timeout=24h "job/$RUN_ID"
envsubst "$vars" < "$here/loadgen-merge.yaml" | kubectl apply -f -
kubectl wait --for=condition=complete --timeout=1h "job/$RUN_ID-merge"
kubectl logs "job/$RUN_ID-merge"
echo "merged results: /results/$RUN_ID/merged.json on the loadgen-results volume"
