"""``python -m odcore recover``: rebuild whole trajectories from counts per cell per slot (Xu et al. 2017,
"Trajectory Recovery From Ash") and score them against the true traces, with and without the lab's defences.

What the command does, as its ``--help`` says it: :data:`odcore.cli.parser.RECOVER_DESCRIPTION`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from odcore.cli import print_json
from odcore.cli.common import (
    od_from_args,
    require_pairs,
    resolve_tz,
    traces_from_args,
)
from odcore.cli.knock import series_grid_args
from odcore.errors import ParameterError
from odcore.knock.timeseries import TimeSeriesConfig
from odcore.od.pairs import bound_contributions
from odcore.paths import atomic_output
from odcore.privacy.release import Mode, ReleaseConfig
from odcore.recover.aggregates import (
    SlotConfig,
    build_population,
    read_counts,
    read_sequences,
    write_counts,
    write_truth,
)
from odcore.recover.experiment import SweepConfig, run_sweep
from odcore.recover.learned import LearnedConfig, learned_vs_exact, people_of_week
from odcore.recover.phases import RecoveryConfig, day_bounds, recover
from odcore.recover.score import chance_accuracy, score


def _hours(text: str) -> tuple[int, int]:
    try:
        h0, h1 = (float(x) for x in str(text).split("-"))
    except ValueError:
        raise ParameterError(f"--night must be H0-H1 in hours, e.g. 0-6, got --night {text!r}.") from None
    return round(h0 * 60), round(h1 * 60)


def population_from_args(args: argparse.Namespace):
    """Traces -> :class:`~odcore.recover.aggregates.Population` (first ``--days``, ``--people`` drawn)."""
    bbox, shape = series_grid_args(args)
    if args.days is not None and args.days < 1:
        raise ParameterError(f"--days must be >= 1, got --days {args.days}.")
    traces = traces_from_args(args)
    tz = resolve_tz(args, traces.report.format)
    n_slots = None if args.days is None else args.days * (1440 // max(1, args.slot_minutes))
    cfg = SlotConfig(TimeSeriesConfig(grid=args.grid, bbox=bbox, shape=shape, slot_minutes=args.slot_minutes,
                                      n_slots=n_slots, tz=tz), min_coverage=args.min_coverage)
    pop = build_population(traces.df, cfg)
    if args.people is not None:
        if args.people < 2:
            raise ParameterError(f"--people must be >= 2, got --people {args.people}.")
        pop = pop.subsample(args.people, args.seed)
    return pop


def run_recover(args: argparse.Namespace) -> int:
    night = _hours(args.night)
    rcfg = RecoveryConfig(night_start=night[0], night_end=night[1], link=not args.no_link)
    out: dict = {}
    if args.counts is not None:
        if args.cells is None:
            raise ParameterError("--counts needs --cells (the cell centres).")
        if args.epsilon is not None:
            raise ParameterError("--epsilon needs traces (--input): defences are applied to true counts.")
        agg = read_counts(args.counts, args.cells)
        if args.recovered is not None:
            _, rec = read_sequences(args.recovered, "trajectory", agg.n_slots)
        else:
            rec = recover(agg, rcfg)
        truth = None
        if args.truth is not None:
            _, truth = read_sequences(args.truth, "user", agg.n_slots)
        pop = None
    else:
        if args.recovered is not None:
            raise ParameterError("--recovered needs --counts and --cells (the release it was recovered from).")
        pop = population_from_args(args)
        agg = pop.aggregates()
        truth = pop.sequences
        if args.write_counts:
            d = Path(args.write_counts)
            write_counts(agg, d / "counts.csv", d / "cells.csv")
            write_truth(pop, d / "truth_do_not_share.csv")
            out["wrote"] = [str(d / n) for n in ("counts.csv", "cells.csv", "truth_do_not_share.csv")]
        rec = recover(agg, RecoveryConfig(rcfg.night_start, rcfg.night_end, rcfg.link, pop.n_users))
        out["population"] = pop.report
    out.update({"people": int(rec.shape[0]), "slots": agg.n_slots, "cells": agg.cells.n_cells})
    if args.out:
        n, t = rec.shape
        frame = pd.DataFrame({"trajectory": np.repeat(np.arange(n), t), "slot": np.tile(np.arange(t), n),
                              "cell": rec.ravel()})
        with atomic_output(args.out) as tmp:
            frame.to_csv(tmp, index=False)
        out["wrote"] = [*out.get("wrote", []), str(args.out)]
    if truth is not None:
        s = score(rec, truth, agg.cells.n_cells, days=day_bounds(agg))
        out["score"] = s.to_dict()
        out["chance"] = round(chance_accuracy(truth, agg.cells.n_cells, args.seed), 4)
    if args.epsilon is not None:
        try:
            eps = tuple(float(e) for e in args.epsilon.split(",") if e.strip())
        except ValueError:
            raise ParameterError(f"--epsilon must be comma-separated numbers, got {args.epsilon!r}.") from None
        cfg = SweepConfig(defences=tuple(x.strip() for x in args.defences.split(",") if x.strip()), epsilons=eps,
                          threshold=args.threshold, max_slots=args.max_slots, recovery=rcfg, seed=args.seed)
        out["sweep"] = run_sweep(pop, cfg, progress=lambda i, n, m: print(f"[{i}/{n}] {m}", file=sys.stderr))
    if args.json:
        print_json(out)
        return 0
    print(f"{out['people']} trajectories × {out['slots']} slots over {out['cells']} cells")
    if "score" in out:
        s = out["score"]
        print(f"accuracy {s['accuracy']:.3f} (greedy matching {s['greedy_accuracy']:.3f}; chance {out['chance']:.3f})"
              f"; per day {', '.join(f'{x:.3f}' for x in s['per_day_accuracy'])}")
        print("top-k unique (true): " + "  ".join(f"k={k}: {v:.3f}" for k, v in s["unique_true_top_k"].items()))
        print("re-identified by top-k: " + "  ".join(f"k={k}: {v:.3f}" for k, v in s["reidentified_top_k"].items()))
    if "sweep" in out:
        sw = out["sweep"]
        print(f"defence     epsilon   accuracy  per-day  (chance {sw['chance']:.3f})")
        for r in sw["rows"]:
            e = "-" if r["epsilon"] is None else f"{r['epsilon']:g}"
            print(f"{r['defence']:<11} {e:>7} {r['accuracy']:>10.3f} {r['per_day_accuracy']:>8.3f}")
        for d, c in sw["chance_epsilon"].items():
            where = f"ε ≈ {c['epsilon']:.3g}" if c["epsilon"] is not None else c["where"].replace("_", " ")
            print(f"{d}: at chance below {where}")
    for w in out.get("wrote", []):
        print(f"wrote {w}")
    return 0


def run_learned(args: argparse.Namespace) -> int:
    cfg = ReleaseConfig(epsilon=args.epsilon, threshold=args.threshold, mode=args.mode, max_pairs=args.max_pairs)
    if args.people < 1:
        raise ParameterError(f"--people must be >= 1, got --people {args.people}.")
    lcfg = LearnedConfig(epsilon=1.0 / cfg.scale, n_train=args.n_train, n_test=args.n_test,
                         classifiers=tuple(c.strip() for c in args.classifiers.split(",") if c.strip()),
                         seed=args.seed)
    _traces, od = od_from_args(args)
    require_pairs(od, "attack-learned attacks each person from their own pairs")
    pairs = od.pairs
    if cfg.mode is Mode.USER_LEVEL:
        pairs, _ = bound_contributions(pairs[pairs["week"] == args.week], cfg.max_pairs, rng=args.seed)
    people = people_of_week(pairs, args.week, args.people, args.seed)
    res = learned_vs_exact(people, lcfg)
    table = res.pop("people")
    out = {**res, "week": args.week, "release": cfg.to_dict(), "people": table.to_dict(orient="records")}
    if args.json:
        print_json(out)
        return 0
    print(f"{len(table)} people of week {args.week}, ε per pair {lcfg.epsilon:.3g}; success on {lcfg.n_test:,} "
          f"fresh games each (±{res['mc_error_pp']:.1f} points, 95 %)")
    cols = ["k", "exact", "two_threshold", "one_threshold", "best_classifier_success", "best_classifier"]
    print(table.sort_values("k")[["person", *cols]].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print("mean gap below p_k (points): " + "  ".join(f"{k}={v:.2f}" for k, v in res["gap_pp"].items()))
    return 0
