#!/usr/bin/env bash
# Knock Knock at the paper's scale on the real Cabspotting data (Pyrgelis et al. 2018): 150 targets (50 from each
# mobility third), both cores (--n-jobs 2), §VI-A (subset of locations, alpha = 0.2, m = 10 and 100) and §VI-C
# (length of the inference period: same-groups prior, beta = 150, m = 100, MLP; one week, one day and 8 hours, on a
# Monday and on a Saturday of the third week, observed on the same weekday of the weeks before).
#   usage: bash docs/knock_knock_paper_scale.sh [subset|periods|all]   then
#          .venv/bin/python docs/knock_knock_table.py "$OUT"
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-/tmp/knock_paper_scale}
TARGETS=${TARGETS:-150}
mkdir -p "$OUT"
COMMON=(--input ../shared/data/cabspotting_sf --format cabspotting --grid sfc --series-cache "$OUT/sfc_series.npz"
        --targets "$TARGETS" --n-jobs 2 --json)
what=${1:-all}
start=$(date +%s)
if [[ $what == subset || $what == all ]]; then
  for m in 10 100; do
    $PY -m odcore knock "${COMMON[@]}" --prior subset --alpha 0.2 --m $m --seed 1 > "$OUT/subset_m$m.json"
  done
fi
if [[ $what == periods || $what == all ]]; then
  # periods of the 3 weeks (Mon 19 May 2008 00:00 PDT first): week = 168 slots, inference period 2 (third week)
  $PY -m odcore knock "${COMMON[@]}" --prior same-groups --m 100 --classifiers mlp --seed 6 \
    > "$OUT/period_week.json"
  # days: Monday of the third week = period 14, Saturday = period 19; observed 7 and 14 days earlier
  $PY -m odcore knock "${COMMON[@]}" --prior same-groups --m 100 --classifiers mlp --seed 6 --period-slots 24 \
    --inference-period 14 --observation-stride 7 > "$OUT/period_day_monday.json"
  $PY -m odcore knock "${COMMON[@]}" --prior same-groups --m 100 --classifiers mlp --seed 6 --period-slots 24 \
    --inference-period 19 --observation-stride 7 > "$OUT/period_day_saturday.json"
  # 8 hours, 08:00-16:00: the second of the day's three periods; Monday = 3*14 + 1, Saturday = 3*19 + 1
  $PY -m odcore knock "${COMMON[@]}" --prior same-groups --m 100 --classifiers mlp --seed 6 --period-slots 8 \
    --inference-period 43 --observation-stride 21 > "$OUT/period_8h_monday.json"
  $PY -m odcore knock "${COMMON[@]}" --prior same-groups --m 100 --classifiers mlp --seed 6 --period-slots 8 \
    --inference-period 58 --observation-stride 21 > "$OUT/period_8h_saturday.json"
fi
echo "wall seconds: $(( $(date +%s) - start )) on $(nproc) cores" >&2
