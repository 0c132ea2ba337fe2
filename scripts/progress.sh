# Sourced by the setup scripts: run a long step with its output in a log, and say every PROGRESS_EVERY_S
# seconds (default 20, fractions allowed) that it is still going, for how long, and how far ninja has got.
#   with_progress LABEL LOG CMD ARGS...   exit status: CMD's
# A silent 10-17 minute build looks like a hang; a line every 20 s (and the log's path) does not.

_progress_ms() {  # seconds, possibly fractional ("0.3", "20") -> milliseconds
  local s=$1 i=${1%%.*} f=0
  [[ $s == *.* ]] && f=${s#*.}
  f="${f}000"
  echo $(( 10#${i:-0} * 1000 + 10#${f:0:3} ))
}

_progress_now_ms() {
  local t=${EPOCHREALTIME/[.,]/}
  echo $(( t / 1000 ))
}

_progress_clock() {  # milliseconds -> "3 min 20 s" / "40 s"
  local s=$(( $1 / 1000 ))
  if (( s >= 60 )); then echo "$(( s / 60 )) min $(( s % 60 )) s"; else echo "$s s"; fi
}

with_progress() {
  local label=$1 log=$2
  shift 2
  local every_ms start next steps rc
  every_ms=$(_progress_ms "${PROGRESS_EVERY_S:-20}")
  start=$(_progress_now_ms)
  next=$(( start + every_ms ))
  "$@" >"$log" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 0.1
    if (( $(_progress_now_ms) >= next )) && kill -0 "$pid" 2>/dev/null; then
      steps=$(grep -o '^\[[0-9]*/[0-9]*\]' "$log" 2>/dev/null | tail -n 1 | tr -d '[]' || true)
      echo "  $label: $(_progress_clock $(( $(_progress_now_ms) - start ))) so far${steps:+, $steps compile steps}; log: $log"
      next=$(( next + every_ms ))
    fi
  done
  rc=0
  wait "$pid" || rc=$?
  return "$rc"
}
