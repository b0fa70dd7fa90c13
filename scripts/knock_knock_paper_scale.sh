#!/usr/bin/env bash
# Knock Knock at the paper's scale on the real Cabspotting data (Pyrgelis et al. 2018): 150 targets (50 from each
# mobility third), both cores (--workers 2: one single-threaded process per core, each playing whole targets),
# §VI-A (subset of locations, alpha = 0.2, m = 10 and 100) and §VI-C (length of the inference period: same-groups
# prior, beta = 150, m = 100, MLP; one week, one day and 8 hours, on a Monday and on a Saturday of the third week,
# observed on the same weekday of the weeks before).
#   usage: bash scripts/knock_knock_paper_scale.sh [subset|periods|all]   then
#          .venv/bin/python scripts/knock_knock_paper_scale_table.py "$OUT"
# Every run writes its JSON (per-target AUC, means, seconds) to $OUT; the load average after each run goes to
# $OUT/load.log.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-/tmp/knock_paper_scale}
TARGETS=${TARGETS:-150}
mkdir -p "$OUT"
COMMON=(--input ../shared/data/cabspotting_sf --format cabspotting --grid sfc --series-cache "$OUT/sfc_series.npz"
        --targets "$TARGETS" --workers "${WORKERS:-2}" --json)
log() { echo "$1 $(date -u +%FT%TZ) $(uptime)" >> "$OUT/load.log"; }
ONLY=${ONLY:-}            # space-separated run names to run (default: all of the chosen section)
CONCURRENT=${CONCURRENT:-0}  # 1: start the runs together (each with $WORKERS processes) and wait for all
knock() {  # knock NAME ARGS...: one run, its JSON in $OUT/NAME.json
  local name=$1; shift
  [[ -z $ONLY || " $ONLY " == *" $name "* ]] || return 0
  if [[ $CONCURRENT == 1 ]]; then
    { $PY -m odcore knock "${COMMON[@]}" "$@" > "$OUT/$name.json" 2> "$OUT/$name.log"; log "$name"; } &
  else
    $PY -m odcore knock "${COMMON[@]}" "$@" > "$OUT/$name.json" 2> "$OUT/$name.log"   # log: each target's AUC
    log "$name"
  fi
}
what=${1:-all}
start=$(date +%s)
log start
if [[ $what == subset || $what == all ]]; then
  for m in 10 100; do
    knock subset_m$m --prior subset --alpha 0.2 --m $m --seed 1
  done
fi
if [[ $what == periods || $what == all ]]; then
  SG=(--prior same-groups --m 100 --classifiers mlp --seed 6)
  # periods of the 3 weeks (Mon 19 May 2008 00:00 PDT first): week = 168 slots, inference period 2 (third week)
  knock period_week "${SG[@]}"
  # days: Monday of the third week = period 14, Saturday = period 19; observed 7 and 14 days earlier
  knock period_day_monday "${SG[@]}" --period-slots 24 --inference-period 14 --observation-stride 7
  knock period_day_saturday "${SG[@]}" --period-slots 24 --inference-period 19 --observation-stride 7
  # 8 hours, 08:00-16:00: the second of the day's three periods; Monday = 3*14 + 1, Saturday = 3*19 + 1
  knock period_8h_monday "${SG[@]}" --period-slots 8 --inference-period 43 --observation-stride 21
  knock period_8h_saturday "${SG[@]}" --period-slots 8 --inference-period 58 --observation-stride 21
fi
wait
echo "wall seconds: $(( $(date +%s) - start )) on $(nproc) cores" | tee -a "$OUT/load.log" >&2
