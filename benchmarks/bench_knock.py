"""Knock Knock (Pyrgelis et al. 2018) on 2 cores: feature extraction, aggregation and one full target.

Cases
-----
- ``features``: the 7 per-ROI statistics for 400 groups × 101 ROIs × 168 hourly slots (the SFC setting, 707
  features per group). Baselines measured in the same run: tsfresh computing the same 7 statistics (the paper's
  tool; only when ``tsfresh`` is importable — it is not a project dependency, run this module from a separate venv
  that has it, see below) and a per-group, per-ROI numpy loop.
- ``aggregate``: A_X for 400 groups as one sparse product vs a Python loop over groups and members.
- ``target``: wall time of one full target (subset prior, α = 0.2, m = 10, 400 + 100 groups, 4 classifiers) on the
  real Cabspotting SFC series when ../shared/data is present, otherwise on a synthetic city of 534 users; plus the
  time of each classifier.

tsfresh: ``python -m venv /tmp/tsf && /tmp/tsf/bin/pip install tsfresh pyarrow`` then
``PYTHONPATH=. /tmp/tsf/bin/python -m benchmarks -k knock`` (the venv needs scikit-learn, scipy, pandas, which
tsfresh pulls in).
"""

from __future__ import annotations

import os
import time

import numpy as np
import pandas as pd

from benchmarks import best_of

TSFRESH_PARAMS = {"variance": None, "minimum": None, "maximum": None, "median": None, "mean": None,
                  "standard_deviation": None, "sum_values": None}


def _row(case, metric, value, unit, baseline=None, ratio=None, note=""):
    return {"case": case, "metric": metric, "value": value, "unit": unit, "baseline": baseline, "ratio": ratio,
            "note": note}


def _loop_features(agg: np.ndarray) -> np.ndarray:
    n, s, _ = agg.shape
    out = np.empty((n, 7, s))
    for g in range(n):
        for r in range(s):
            x = agg[g, r]
            out[g, :, r] = (x.var(), x.min(), x.max(), np.median(x), x.mean(), x.std(), x.sum())
    return out.reshape(n, -1)


def _tsfresh_features(agg: np.ndarray) -> np.ndarray | None:
    try:
        from tsfresh import extract_features as ts_extract
    except ImportError:
        return None
    n, s, t = agg.shape
    long = pd.DataFrame({"id": np.repeat(np.arange(n), s * t), "kind": np.tile(np.repeat(np.arange(s), t), n),
                         "time": np.tile(np.arange(t), n * s), "value": agg.ravel()})
    f = ts_extract(long, column_id="id", column_sort="time", column_kind="kind", column_value="value",
                   default_fc_parameters=TSFRESH_PARAMS, n_jobs=os.cpu_count() or 1, disable_progressbar=True)
    names = ["variance", "minimum", "maximum", "median", "mean", "standard_deviation", "sum_values"]
    cols = [f"{r}__{st}" for st in names for r in range(s)]
    return f.loc[np.arange(n), cols].to_numpy()


def _series():
    """The real SFC series when the shared data is present, else a synthetic city with the SFC shape."""
    from odcore.knock.timeseries import TimeSeriesConfig, build_timeseries
    from odcore.paths import SHARED_DATA_DIR

    src = SHARED_DATA_DIR / "cabspotting_sf"
    if src.is_dir():
        from odcore.data.traces import load_traces

        t0 = time.perf_counter()
        tr = load_traces(src, format="cabspotting", tz="America/Los_Angeles", bbox=None)
        t1 = time.perf_counter()
        ts = build_timeseries(tr.df, TimeSeriesConfig(grid="sfc", tz="America/Los_Angeles"))
        return ts, "real Cabspotting SFC (534 cabs, 101 ROIs, 504 slots)", t1 - t0, time.perf_counter() - t1
    from odcore.data.synth import SynthConfig, generate_city

    df = generate_city(SynthConfig(users=534, weeks=3), 0)
    t1 = time.perf_counter()
    ts = build_timeseries(df, TimeSeriesConfig())
    return ts, "synthetic city (534 users; shared data absent)", None, time.perf_counter() - t1


def run(quick: bool) -> list[dict]:
    from odcore.knock.classifiers import ALL_CLASSIFIERS, fit_scores
    from odcore.knock.experiment import KnockConfig, run_target
    from odcore.knock.features import extract_features, select_features
    from odcore.knock.game import make_game

    rows: list[dict] = []
    ts, what, t_load, t_build = _series()
    if t_load is not None:
        rows.append(_row("series", "load traces", t_load, "s", note="10.0 M GPS fixes"))
    rows.append(_row("series", "build L_u (sparse)", t_build, "s", note=what))

    n_groups = 40 if quick else 400
    rng = np.random.default_rng(0)
    w = ts.window(0, 168)
    dense = ts.aggregation_operand(0, 168)  # what the experiments use when it fits in memory (36 MB here)
    agg = None
    for m in (10, 100, 500):
        groups = np.argpartition(rng.random((n_groups, ts.n_users)), m - 1, axis=1)[:, :m]
        t_ss, a_ss = best_of(lambda g=groups: ts.aggregate(g, 0, 168, window=w))
        t_auto, a_auto = best_of(lambda g=groups: ts.aggregate(g, 0, 168, window=dense))

        def loop(g=groups):
            out = np.zeros((n_groups, dense.shape[1]), dtype=np.float32)
            for i, grp in enumerate(g):
                for u in grp:
                    out[i] += dense[u]
            return out

        t_loop, ref = best_of(loop)
        assert np.array_equal(ref.reshape(a_ss.shape), a_ss)
        assert np.array_equal(a_auto, a_ss)
        kind = "sparse x dense" if m <= 32 else "BLAS dense"
        rows.append(_row("aggregate", f"{n_groups} groups m={m}, indicator @ dense operand ({kind})", t_auto, "s",
                         "python loop over members", t_loop / t_auto,
                         f"loop {t_loop:.3f} s; sparse x sparse {t_ss:.3f} s; identical counts"))
        if m == 10:
            agg = a_auto

    t_ours, feats = best_of(lambda: extract_features(agg))
    t_l, f_loop = best_of(lambda: _loop_features(agg), repeat=1)
    rows.append(_row("features", f"{n_groups} groups x {ts.n_rois} ROIs x 168, 7 stats", t_ours, "s",
                     "numpy loop per group/ROI", t_l / t_ours,
                     f"max |diff| {np.abs(feats - f_loop).max():.1e}; {feats.shape[1]} features"))
    t0 = time.perf_counter()
    f_ts = _tsfresh_features(agg)
    t_ts = time.perf_counter() - t0
    if f_ts is None:
        rows.append(_row("features", "tsfresh, same 7 statistics", None, "s", note=(
            "SKIPPED: tsfresh not importable here (not a project dependency); run from a venv with tsfresh, "
            "see the module docstring")))
    else:
        rows.append(_row("features", f"{n_groups} groups, 7 stats", t_ours, "s", "tsfresh", t_ts / t_ours,
                         f"tsfresh {t_ts:.2f} s on {os.cpu_count()} jobs; max |diff| "
                         f"{np.nanmax(np.abs(feats - f_ts)):.1e}"))

    # one full target: subset prior, alpha = 0.2, m = 10, all four classifiers (the paper's §VI-A setting)
    cfg = KnockConfig(prior="subset", m=10, alpha=0.2, targets=1, seed=0)
    reports = ts.reports()
    target = int(np.argsort(reports)[len(reports) // 2])
    t0 = time.perf_counter()
    run_target(ts, target, cfg, np.random.default_rng(1), sensitivity=ts.sensitivity(0, 168))
    t_target = time.perf_counter() - t0
    rows.append(_row("target", "one target, m=10, 4 classifiers (end to end)", t_target, "s",
                     note=f"{what}; 400 train + 100 test groups"))
    game = make_game(ts.n_users, ts.n_slots, target, cfg.game(), 2)
    xtr = extract_features(ts.aggregate(game.train_groups, 0, 168, window=w))
    xte = extract_features(ts.aggregate(game.test_groups, 0, 168, window=w))
    keep = select_features(xtr, game.train_labels)
    for c in ALL_CLASSIFIERS:
        t0 = time.perf_counter()
        fit_scores(c, xtr[:, keep], game.train_labels, [xte[:, keep]], seed=0, n_jobs=2)
        rows.append(_row("target", f"classifier {c.value} fit+score", time.perf_counter() - t0, "s",
                         note=f"{int(keep.sum())} features, 400 samples"))
    if not quick:
        t0 = time.perf_counter()
        select_features(xtr, game.train_labels, "rfe-fast")
        t_rf = time.perf_counter() - t0
        t0 = time.perf_counter()
        select_features(xtr, game.train_labels, "rfe")
        t_rfe = time.perf_counter() - t0
        rows.append(_row("target", "feature selection rfe (paper, step 1)", t_rfe, "s", "rfe-fast (10%/step)",
                         t_rfe / t_rf, f"rfe-fast {t_rf:.2f} s"))
    return rows
