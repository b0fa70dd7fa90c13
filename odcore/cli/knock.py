"""``python -m odcore knock`` and ``python -m odcore defences`` (Pyrgelis et al. 2018, Knock Knock).

``knock`` plays the membership-inference game for sampled targets and prints per-target AUCs, mean AUC and
privacy loss per classifier (optionally under a DP defence: AUC on raw and noisy releases, privacy gain).
``defences`` prints the MRE table of the DP mechanisms (the paper's Tables II/III).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from odcore.cli.common import add_loader_args


def _add_series_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("location time-series (ROIs x time slots)")
    g.add_argument("--grid", default="auto", choices=["auto", "sfc", "bbox", "loc"],
                   help="ROIs: 'auto' = 10x10 grid over the box of the central 98%% of points; 'sfc' = the paper's "
                        "downtown San Francisco grid (10x10 cells of 0.18 sq mi); 'bbox' = --grid-bbox; 'loc' = "
                        "one ROI per value of the loc column (default: %(default)s)")
    g.add_argument("--grid-bbox", default=None, metavar="S,W,N,E", help="grid box for --grid bbox")
    g.add_argument("--grid-shape", default="10x10", metavar="ROWSxCOLS", help="grid shape (default %(default)s)")
    g.add_argument("--slot-minutes", type=int, default=60, help="time slot length (default %(default)s)")
    g.add_argument("--series-start", default=None,
                   help="start of slot 0 (naive = in --tz; default: midnight of the first record's day)")
    g.add_argument("--series-cache", default=None, metavar="PATH.npz",
                   help="save the built series here and reuse it when input and series options are unchanged")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("knock", help="Knock Knock membership inference on aggregate location time-series",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_loader_args(p)
    _add_series_args(p)
    g = p.add_argument_group("game")
    g.add_argument("--prior", default="subset", choices=["subset", "same-groups", "different-groups", "perfect"],
                   help="adversarial prior (Sec. IV-A; 'perfect' = Sec. VII-B worst case) (default %(default)s)")
    g.add_argument("--m", type=int, default=10, help="group size (default %(default)s)")
    g.add_argument("--alpha", type=float, default=0.2, help="subset prior: fraction of users known (default 0.2)")
    g.add_argument("--targets", type=int, default=3, help="number of targets, equally from mobility thirds")
    g.add_argument("--target-ids", default=None, help="comma-separated user ids instead of sampling")
    g.add_argument("--classifiers", default="lr,knn,rf,mlp", help="subset of lr,knn,rf,mlp (default all)")
    g.add_argument("--selection", default="variance", choices=["none", "variance", "rfe", "rfe-fast"],
                   help="feature selection: 'rfe' = paper (RFE to #training samples, slow); default %(default)s")
    g.add_argument("--n-train", type=int, default=400, help="subset prior: training groups (default 400)")
    g.add_argument("--n-test", type=int, default=100, help="subset prior: test groups (default 100)")
    g.add_argument("--beta", type=int, default=150, help="same-groups prior: groups (default 150)")
    g.add_argument("--n-groups", type=int, default=400, help="different-groups/perfect: groups (default 400)")
    g.add_argument("--period-slots", type=int, default=168, help="slots per period (default 168 = 1 week)")
    g.add_argument("--inference-period", type=int, default=None,
                   help="index of the inference period (default: first for subset/perfect, last otherwise)")
    g.add_argument("--observation-stride", type=int, default=None, metavar="PERIODS",
                   help="same-groups/different-groups: observe only the periods this many apart from the inference "
                        "period (7 with --period-slots 24: the same weekday of every other week; default: all)")
    g.add_argument("--seed", type=int, default=0, help="random seed (default %(default)s)")
    g.add_argument("--n-jobs", type=int, default=2, help="parallel jobs for the random forest (default 2)")
    g.add_argument("--workers", type=int, default=1,
                   help="processes playing targets in parallel, one per core (default 1); same result for any number")
    d = p.add_argument_group("DP defence of the released aggregates (Sec. VII)")
    d.add_argument("--defence", default=None, choices=["lpa", "lpa-event", "gsm", "fpa", "efpag"])
    d.add_argument("--epsilon", type=float, default=None)
    d.add_argument("--delta", type=float, default=0.1, help="for gsm/efpag (default 0.1)")
    d.add_argument("--kappa", type=int, default=20, help="fpa coefficients (default 20)")
    d.add_argument("--clip", default="group", choices=["none", "nonneg", "group"],
                   help="post-processing: clip to [0, m] ('group', default), [0, inf) or none")
    d.add_argument("--norm", default="ortho", choices=["ortho", "backward"],
                   help="fpa/efpag transform scaling ('backward' is NOT DP; shows default-FFT magnitudes)")
    d.add_argument("--round", dest="round_counts", action="store_true",
                   help="post-processing: round released values to integers")
    d.add_argument("--train-on-noisy", action="store_true", help="strategic adversary trained on noisy aggregates")
    p.add_argument("--roc", action="store_true", help="include ROC curves in the JSON")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run_knock)

    q = sub.add_parser("defences", help="MRE of the DP defences on aggregate location time-series (Tables II/III)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_loader_args(q)
    _add_series_args(q)
    q.add_argument("--epsilon", default="0.01,0.1,1,10", help="comma-separated epsilons (default %(default)s)")
    q.add_argument("--mechanisms", default="lpa,lpa-event,gsm,fpa,efpag")
    q.add_argument("--m", type=int, default=None, help="group size (default min(500, users-1))")
    q.add_argument("--groups", type=int, default=20, help="random groups averaged (default %(default)s)")
    q.add_argument("--period-slots", type=int, default=168)
    q.add_argument("--inference-period", type=int, default=0)
    q.add_argument("--delta", type=float, default=0.1)
    q.add_argument("--kappa", type=int, default=20)
    q.add_argument("--clip", default="group", choices=["none", "nonneg", "group"])
    q.add_argument("--norm", default="ortho", choices=["ortho", "backward"])
    q.add_argument("--round", dest="round_counts", action="store_true", help="round released values")
    q.add_argument("--gamma-scope", default="series", choices=["series", "matrix"],
                   help="MRE sanity bound: 0.1%% of each ROI series' sum (paper) or of the whole release")
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=run_defences)


def _parse_pair(text: str, name: str, sep: str, n: int, typ=float) -> tuple:
    from odcore.errors import ParameterError

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
    from odcore.data.validate import check_param

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
    import json

    from odcore.cli.common import resolve_tz, traces_from_args
    from odcore.knock.timeseries import LocationTimeSeries, TimeSeriesConfig, build_timeseries

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
    from odcore.cli import print_json
    from odcore.knock.experiment import KnockConfig, run_experiment

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
    from odcore.cli import print_json
    from odcore.errors import ParameterError
    from odcore.knock.experiment import MREConfig, mre_table

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
