#!/usr/bin/env bash
# Reproduces docs/knock_knock_results.md: Pyrgelis et al. 2018 (Knock Knock) SFC experiments on the real
# Cabspotting data in ../shared/data/cabspotting_sf. Writes one JSON per run into $OUT (not the repo: the JSON
# holds per-cab results) and then prints the tables with scripts/knock_knock_table.py.
#   usage: bash scripts/knock_knock_experiments.sh [subset|rfe|past|mre|defences|backward|all]   (default all)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-/tmp/knock_results}
TARGETS=${TARGETS:-45}          # per experiment, 1/3 from each mobility third (paper: 150)
DTARGETS=${DTARGETS:-10}        # per defence experiment (paper: 150)
mkdir -p "$OUT"
COMMON=(--input ../shared/data/cabspotting_sf --format cabspotting --grid sfc --series-cache "$OUT/sfc_series.npz")
what=${1:-all}

if [[ $what == subset || $what == all ]]; then   # Section VI-A, Fig. 3b/4: subset of locations, alpha = 0.2
  for m in 5 10 50 100; do
    $PY -m odcore knock "${COMMON[@]}" --prior subset --alpha 0.2 --m $m --targets $TARGETS --seed 1 --json \
      > "$OUT/subset_m$m.json"
  done
fi
if [[ $what == rfe || $what == all ]]; then      # the paper's feature selection: RFE down to the training size
  for m in 10 100; do
    $PY -m odcore knock "${COMMON[@]}" --prior subset --alpha 0.2 --m $m --targets $TARGETS --seed 1 \
      --selection rfe --json > "$OUT/subset_rfe_m$m.json"
  done
fi
if [[ $what == past || $what == all ]]; then     # Section VI-B, Figs. 7 and 10: participation in past groups
  for m in 10 100; do
    $PY -m odcore knock "${COMMON[@]}" --prior same-groups --m $m --targets $TARGETS --seed 2 --json \
      > "$OUT/same_m$m.json"
    $PY -m odcore knock "${COMMON[@]}" --prior different-groups --m $m --targets $TARGETS --seed 3 --json \
      > "$OUT/diff_m$m.json"
  done
fi
if [[ $what == mre || $what == all ]]; then      # Section VII-C, Table III: utility (MRE), m = 500, first week
  $PY -m odcore defences "${COMMON[@]}" --m 500 --groups 50 --seed 4 --json > "$OUT/mre.json"
  $PY -m odcore defences "${COMMON[@]}" --m 500 --groups 50 --seed 4 --round --json > "$OUT/mre_round.json"
  $PY -m odcore defences "${COMMON[@]}" --m 500 --groups 50 --seed 4 --round --norm backward --json \
    > "$OUT/mre_round_backward.json"
  $PY -m odcore defences "${COMMON[@]}" --m 500 --groups 50 --seed 4 --gamma-scope matrix --json \
    > "$OUT/mre_matrix.json"
fi
if [[ $what == defences || $what == all ]]; then # Section VII-C, Figs. 12b/13b: privacy gain, MLP, m = 500
  for mech in lpa lpa-event gsm fpa efpag; do
    for eps in 0.01 0.1 1 10; do
      for mode in raw noisy; do
        extra=(); [[ $mode == noisy ]] && extra=(--train-on-noisy)
        $PY -m odcore knock "${COMMON[@]}" --prior perfect --m 500 --classifiers mlp --targets $DTARGETS \
          --defence $mech --epsilon $eps "${extra[@]}" --seed 5 --json > "$OUT/pg_${mech}_${eps}_${mode}.json"
      done
    done
  done
fi
if [[ $what == backward || $what == all ]]; then # FPA/EFPAG with unnormalised transforms (NOT DP; see the doc)
  for mech in fpa efpag; do
    for mode in raw noisy; do
      extra=(); [[ $mode == noisy ]] && extra=(--train-on-noisy)
      $PY -m odcore knock "${COMMON[@]}" --prior perfect --m 500 --classifiers mlp --targets $DTARGETS \
        --defence $mech --epsilon 10 --norm backward "${extra[@]}" --seed 5 --json > "$OUT/pgb_${mech}_10_${mode}.json"
    done
  done
fi
[[ -f scripts/knock_knock_table.py ]] && $PY scripts/knock_knock_table.py "$OUT"
