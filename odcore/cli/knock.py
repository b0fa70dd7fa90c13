"""``python -m odcore knock`` and ``python -m odcore defences`` (Pyrgelis et al. 2018, Knock Knock).

What the command does, as its ``--help`` says it: :data:`odcore.cli.parser.KNOCK_DESCRIPTION`.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from odcore.cli import print_json
from odcore.cli.common import resolve_tz, traces_from_args
from odcore.data.validate import check_param
from odcore.errors import ParameterError
from odcore.knock.experiment import KnockConfig, MREConfig, mre_table, run_experiment
from odcore.knock.timeseries import LocationTimeSeries, TimeSeriesConfig, build_timeseries


def _parse_pair(text: str, name: str, sep: str, n: int, typ=float) -> tuple:
    parts = [x.strip() for x in str(text).lower().split(sep)]
    try:
        vals = tuple(typ(x) for x in parts)
    except ValueError:
        vals = ()
    if len(vals) != n:
        raise ParameterError(f"{name} must be {n} values separated by {sep!r}, got {name}={text!r}.")
    return vals


def series_grid_args(args: argparse.Namespace) -> tuple[tuple[float, float, float, float] | None, tuple[int, int]]:
    """``(bbox, shape)`` of ``--grid-bbox`` and ``--grid-shape``, checked before any trace is read."""
    bbox = None
    if args.grid_bbox is not None:
        s, w, n, e = _parse_pair(args.grid_bbox, "--grid-bbox", ",", 4)
        bbox = (s, w, n, e)
    shape = _parse_pair(args.grid_shape, "--grid-shape", "x", 2, int)
    for v in shape:
        check_param("grid_side", v, flag="--grid-shape rows and columns each")
    return bbox, shape


def series_from_args(args: argparse.Namespace):
    """Load traces and build the :class:`~odcore.knock.timeseries.LocationTimeSeries` (or reuse the cache)."""
    bbox, shape = series_grid_args(args)
    key = json.dumps({"input": str(Path(args.input).resolve()), "format": args.format, "tz": args.tz,
                      "bbox": args.bbox, "start": args.start, "end": args.end, "offset": args.time_offset,
                      "grid": args.grid, "grid_bbox": bbox, "shape": shape, "slot": args.slot_minutes,
                      "series_start": args.series_start}, sort_keys=True)
    cache = Path(args.series_cache) if args.series_cache else None
    if cache is not None and cache.exists():
        ts = LocationTimeSeries.load(cache)
        if ts.report.get("cache_key") == key:
            print(f"reusing location time-series from {cache}", file=sys.stderr)
            return ts
    t0 = time.perf_counter()
    traces = traces_from_args(args)
    tz = resolve_tz(args, traces.report.format)
    cfg = TimeSeriesConfig(grid=args.grid, bbox=bbox, shape=shape, slot_minutes=args.slot_minutes,
                           start=args.series_start, tz=tz)
    ts = build_timeseries(traces.df, cfg)
    ts.report["cache_key"] = key
    ts.report["loader"] = traces.summary()
    print(f"built location time-series in {time.perf_counter() - t0:.1f} s: {ts.n_users} users, "
          f"{ts.n_rois} ROIs (null included), {ts.n_slots} slots; grid {ts.grid.to_dict() if ts.grid else 'loc'}",
          file=sys.stderr)
    if cache is not None:
        ts.save(cache)
    return ts


def _progress(done: int, total: int, msg: str) -> None:
    width = 24
    filled = int(width * done / max(total, 1))
    print(f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {msg}", file=sys.stderr, flush=True)


def run_knock(args: argparse.Namespace) -> int:
    config = KnockConfig(
        prior=args.prior, m=args.m, alpha=args.alpha, targets=args.targets,
        target_ids=tuple(t.strip() for t in args.target_ids.split(",") if t.strip()) if args.target_ids else None,
        classifiers=args.classifiers, selection=args.selection, defence=args.defence, epsilon=args.epsilon,
        delta=args.delta, kappa=args.kappa, clip=args.clip, norm=args.norm, round_counts=args.round_counts,
        train_on_noisy=args.train_on_noisy,
        seed=args.seed, n_train=args.n_train, n_test=args.n_test, beta=args.beta, n_groups=args.n_groups,
        period_slots=args.period_slots, inference_period=args.inference_period,
        observation_stride=args.observation_stride, n_jobs=args.n_jobs)
    ts = series_from_args(args)
    res = run_experiment(ts, config, progress=_progress, workers=args.workers)
    out = res.to_dict(with_roc=args.roc)
    if args.json:
        print_json(out)
        return 0
    print(f"prior={config.prior.value} m={config.m} targets={len(res.per_target)} Δ={res.sensitivity} "
          f"({res.seconds:.1f} s)")
    print("mean AUC: " + "  ".join(f"{k}={v:.3f}" for k, v in res.mean_auc.items()))
    print("mean PL:  " + "  ".join(f"{k}={v:.3f}" for k, v in res.mean_pl.items()))
    if res.mean_pg is not None:
        print("mean PG:  " + "  ".join(f"{k}={v:.3f}" for k, v in res.mean_pg.items()) + f"   MRE={res.mre:.3f}")
    return 0


def run_defences(args: argparse.Namespace) -> int:
    try:
        eps = tuple(float(e) for e in args.epsilon.split(",") if e.strip())
    except ValueError:
        raise ParameterError(f"--epsilon must be comma-separated numbers, got {args.epsilon!r}.") from None
    cfg = MREConfig(epsilons=eps, mechanisms=tuple(x.strip() for x in args.mechanisms.split(",") if x.strip()),
                    m=args.m, n_groups=args.groups, period_slots=args.period_slots,
                    inference_period=args.inference_period, delta=args.delta, kappa=args.kappa, clip=args.clip,
                    norm=args.norm, round_counts=args.round_counts, gamma_scope=args.gamma_scope,
                    seed=args.seed)
    ts = series_from_args(args)
    t0 = time.perf_counter()
    out = mre_table(ts, cfg)
    out["seconds"] = round(time.perf_counter() - t0, 3)
    if args.json:
        print_json(out)
        return 0
    print(f"MRE (m={out['m']}, {out['n_groups']} groups, Δ={out['sensitivity']})")
    print("mechanism   " + "".join(f"{k:>10}" for k in next(iter(out["mre"].values()))))
    for mech, row in out["mre"].items():
        print(f"{mech:<12}" + "".join(f"{v:>10.4g}" for v in row.values()))
    return 0
