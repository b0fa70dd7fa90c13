"""``python -m odcore audit``: the release's guarantee tested on the release itself (:mod:`odcore.privacy.audit`);
``python -m odcore selection``: which pairs each partition-selection strategy publishes (:mod:`odcore.privacy.selection`).

For each unit (per count, per person and week) it prints the empirical 95 % lower bound on ε of a one-run audit
(Steinke, Nasr and Jagielski 2023) and, with ``--many-runs R``, of the classic many-run audit, beside the ε the
theory gives for that unit.
"""

from __future__ import annotations

import argparse
import math
import time

from odcore.cli import print_json
from odcore.cli.common import od_from_args, require_pairs
from odcore.errors import ParameterError
from odcore.privacy.audit import AuditConfig, audit_many_runs, audit_one_run
from odcore.privacy.selection import compare_selection
from odcore.report.facts import audit_most_shown, audit_sentence


def run_audit(args: argparse.Namespace) -> int:
    _traces, od = od_from_args(args)
    require_pairs(od, "audit inserts canary people among the week's people")
    units = ["count", "person"] if args.unit == "both" else [args.unit]
    out: dict = {"input": str(args.input), "seed": args.seed, "units": {}}
    for unit in units:
        cfg = AuditConfig(epsilon=args.epsilon, threshold=args.threshold, unit=unit, placement=args.placement,
                          canaries=args.canaries, trips=args.trips, guess_share=args.guess_share,
                          confidence=args.confidence, delta=args.delta, private=not args.no_noise)
        t0 = time.perf_counter()
        r = audit_one_run(od.pairs, cfg, week=args.week, rng=args.seed)
        entry = {"epsilon_lower": r.epsilon_lower, "epsilon_theory": r.epsilon_theory, "trips": r.trips,
                 "guesses": r.guesses, "correct": r.correct, "canaries": r.canaries,
                 "epsilon_most_shown": audit_most_shown(r.guesses, args.confidence),
                 "seconds": round(time.perf_counter() - t0, 2),
                 "details": {k: _finite(v) for k, v in r.details.items()}}
        if args.many_runs:
            t0 = time.perf_counter()
            mr = audit_many_runs(od.pairs, cfg, runs=args.many_runs, week=args.week, rng=args.seed)
            entry["many_runs"] = {"epsilon_lower": mr.epsilon_lower, "runs": args.many_runs,
                                  "correct": mr.correct, "tested": mr.guesses,
                                  "seconds": round(time.perf_counter() - t0, 2)}
        out["units"][unit] = entry
    if not args.no_noise:   # the page's words for these numbers (odcore.report.facts.audit_sentence)
        out["words"] = audit_sentence(out["units"], args.epsilon, args.confidence)
    if args.json:
        print_json(out)
        return 0
    noise = "no noise" if args.no_noise else f"epsilon {args.epsilon:g} per count"
    print(f"audit of one week's release ({noise}, threshold {args.threshold:g}, {args.placement} canaries, "
          f"{args.confidence:.0%} confidence)")
    for unit, e in out["units"].items():
        label = "per count" if unit == "count" else f"per person and week ({e['trips']} unique pairs)"
        line = (f"{label}: lower bound {e['epsilon_lower']:.3f} from {e['correct']}/{e['guesses']} right guesses "
                f"on {e['canaries']} canaries; theory {e['epsilon_theory']:.3f}")
        if "many_runs" in e:
            line += f"; many runs ({e['many_runs']['runs']}): {e['many_runs']['epsilon_lower']:.3f}"
        print(line)
    if "words" in out:
        print(out["words"])
    return 0


def run_selection(args: argparse.Namespace) -> int:
    try:
        ms = [int(x) for x in str(args.max_pairs).split(",") if x.strip()]
    except ValueError:
        raise ParameterError(f"--max-pairs must be whole numbers separated by commas, got {args.max_pairs!r}.") \
            from None
    _traces, od = od_from_args(args)
    require_pairs(od, "selection bounds each person's pairs")
    out: dict = {"input": str(args.input), "epsilon": args.epsilon, "delta": args.delta, "tables": {}}
    for m in ms:
        t = compare_selection(od.pairs, epsilon=args.epsilon, delta=args.delta, max_pairs=m, week=args.week,
                              rng=args.seed, pipeline_dp=not args.no_pipeline_dp)
        rows = [{k: _finite(v) for k, v in r.items()} for r in t.to_dict(orient="records")]
        out["tables"][str(m)] = {"about": dict(t.attrs), "rows": rows}
    if args.json:
        print_json(out)
        return 0
    if args.markdown:
        print("| m | strategy | mechanism | pairs (expected) | user-trips | error: total / bounding / noise | why |")
        print("|---|---|---|---|---|---|---|")
        for m, tab in out["tables"].items():
            for r in tab["rows"]:
                r = {k: (math.nan if v is None else v) for k, v in r.items()}
                if "pairs_published" not in r:
                    print(f"| {m} | {r['strategy']} | {r.get('mechanism', '–')} | | | | {r.get('why', '')} |")
                    continue
                exp = "" if math.isnan(r["pairs_expected"]) else f" ({r['pairs_expected']:.1f})"
                err = "–" if math.isnan(r["mre_total"]) else (f"{r['mre_total']:.1%} / {r['mre_bounding']:.1%} / "
                                                              f"{r['mre_noise']:.1%}")
                print(f"| {m} | {r['strategy']} | {r['mechanism']} | {r['pairs_published']}{exp} | {r['user_trips_published']:,} | "
                      f"{err} | {r['why']} |")
        return 0
    for m, tab in out["tables"].items():
        a = tab["about"]
        print(f"m = {m}: week {a['week']}, {a['people']:,} people, {a['pairs']:,} pairs after bounding; "
              f"epsilon {args.epsilon:g}, delta {args.delta:g} per person and week")
        for r in tab["rows"]:
            r = {k: (math.nan if v is None else v) for k, v in r.items()}
            if "pairs_published" not in r or (isinstance(r.get("pairs_published"), float)
                                              and math.isnan(r["pairs_published"])):
                print(f"  {r['strategy']:<55} {r.get('why', '')}")
                continue
            exp = "" if math.isnan(r["pairs_expected"]) else f" (expected {r['pairs_expected']:.1f})"
            err = "" if math.isnan(r["mre_total"]) else (f", error {r['mre_total']:.1%} (bounding "
                                                         f"{r['mre_bounding']:.1%}, noise {r['mre_noise']:.1%})")
            print(f"  {r['strategy']:<55} [{r['mechanism']}] {r['pairs_published']:>5} pairs{exp}, "
                  f"{r['user_trips_published']:,} user-trips{err}")
    return 0


def _finite(v):
    """None for a NaN or infinite float (JSON has neither), the value otherwise."""
    return None if isinstance(v, float) and not math.isfinite(v) else v
