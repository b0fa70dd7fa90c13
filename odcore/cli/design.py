"""``python -m odcore design``: settings (max_pairs, noise scale, threshold) that meet a privacy goal per person.

Goals (``--goal``): ``week`` (epsilon per person and week <= --target-epsilon), ``total`` (over --weeks weeks),
``attack`` (an attacker knowing --known-trips trips is right at most --success of the time), ``tpr`` / ``advantage`` /
``posterior`` (the attacker's TPR at --fpr, TPR - FPR, or belief from --prior, for --attacker known or full); all
with total delta <= --target-delta. The verdict (``useful`` in --json) says whether the release would be worth
publishing (expected relative error at most 10 %) and, if not, what would change it. Measures what the release keeps on one week of the data (:func:`odcore.privacy.design.design_report`)
and optionally writes the guarantee sheet (``--sheet FILE.html``).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from odcore.cli import print_json
from odcore.cli.common import od_from_args
from odcore.cli.parser import DEFAULT_KNOWN_TRIPS
from odcore.constants import WEEK
from odcore.errors import ParameterError
from odcore.paths import atomic_output
from odcore.privacy.design import Goal, design_report
from odcore.report.facts import week_trips
from odcore.report.plain_json import jsonable
from odcore.report.sheet import guarantee_sheet


def run(args: argparse.Namespace) -> int:
    risk_goal = args.goal in ("tpr", "advantage", "posterior")
    default_k = (args.goal == "attack" or risk_goal) and args.known_trips is None
    if default_k:
        args.known_trips = DEFAULT_KNOWN_TRIPS
    goal = Goal(kind=args.goal, epsilon=args.target_epsilon, delta=args.target_delta, weeks=args.weeks,
                known_trips=args.known_trips if args.goal == "attack" or risk_goal else None,
                success=args.success if args.goal == "attack" else None,
                risk=getattr(args, args.goal) if risk_goal else None, fpr=args.fpr, prior=args.prior,
                attacker=args.attacker)
    if default_k:   # said once the goal is known to be valid
        print(f"note: goal {args.goal}: the attacker knows k = {DEFAULT_KNOWN_TRIPS} trips (the default; give "
              "--known-trips to choose)", file=sys.stderr)
    _, od = od_from_args(args)
    weeks_present = sorted(int(x) for x in od.pairs[WEEK].unique())
    if not weeks_present:
        raise ParameterError("the data has no trips: nothing to measure the release on.")
    week = weeks_present[0] if args.week is None else int(args.week)
    if week not in weeks_present:
        raise ParameterError(f"--week={week} has no trips; weeks with trips: {weeks_present}.")
    trips = week_trips(od.user_week, week)   # the week's people: those with a trip (odcore.report.facts)
    rep = jsonable(design_report(goal, od.week_pairs(week), trips, week=week, max_pairs=args.max_pairs,
                                  tune=args.tune, rng=args.seed))
    if args.sheet:
        path = Path(args.sheet)
        try:
            with atomic_output(path) as tmp:
                tmp.write_text(guarantee_sheet(rep), encoding="utf-8")
        except OSError as exc:
            raise ParameterError(f"--sheet {path}: cannot write ({exc}).") from None
        rep["sheet"] = str(path)
    if args.json:
        print_json(rep)
        return 0
    _print(rep)
    return 0


def _f(x, spec: str = ".4g") -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def _print(r: dict) -> None:
    v = r["verdict"]
    print(f"verdict: {'USEFUL' if r['useful'] else 'NOT USEFUL'} - {v['headline']}")
    for c in r.get("would_change", []):
        print(f"  would change it: {c['words']}")
    print(f"goal: {r['goal']['words']} -> {'met' if r['goal_met'] else 'NOT met'} ({_f(r['goal_value'])})")
    print(f"attacker the goal bounds: {r['goal']['attacker_words']}")
    rk = r["risk"]
    for key in ("known", "full"):
        if key in rk:
            a = rk[key]
            print(f"  {a['attacker']}: TPR {_f(100 * a['tpr'], '.2f')} % at FPR {_f(100 * rk['fpr'], '.3g')} %, "
                  f"advantage {_f(a['advantage'], '.3f')}, posterior from {_f(100 * rk['prior'], '.3g')} % at most "
                  f"{_f(100 * a['posterior'], '.1f')} % (except with probability {_f(rk['delta_partition'], '.2g')})")
    print(f"expected utility: relative error {_f(100 * r['relative_error'], '.1f')} % on published counts "
          f"(contribution bounding {_f(100 * r['relative_error_bounding'], '.1f')} %, noise "
          f"{_f(100 * r['relative_error_noise'], '.1f')} %; level {_f(100 * r['error_level'], '.0f')} %), "
          f"{_f(r['pairs_published_expected'], '.1f')} pairs, {_f(100 * r['trips_published_frac_expected'], '.1f')} % "
          f"of user-trips, {_f(r['mostly_noise_expected'], '.2g')} pairs mostly noise")
    print(f"settings: max_pairs {r['max_pairs']}, epsilon {_f(r['epsilon'])} (noise scale {_f(r['noise_scale'])}), "
          f"threshold {r['threshold']}")
    print(f"per person: epsilon {_f(r['epsilon_user_week'])} per week (delta {_f(r['delta_user_week'], '.3g')}), "
          f"{_f(r['epsilon_user_total'])} over {r['weeks']} weeks (delta {_f(r['delta_user_total'], '.3g')})")
    print(f"attacker who knows all trips: right at most {_f(100 * r['attack_success_typical'], '.1f')} % for a "
          f"typical person ({r['typical_trips']} trips), {_f(100 * r['attack_success_busy'], '.1f')} % for the "
          f"busiest ({r['busy_trips']})")
    print(f"week {r['week']} keeps: {r['pairs_published']} of {r['pairs_total']} pairs, {r['trips_published']} of "
          f"{r['trips_total']} user-trips; mean relative error {_f(r['mean_relative_error'], '.3g')}; "
          f"{r['noise_dominated_published']} published pairs have a true count under {r['threshold'] / 2:g}")
    d = r["default"]
    print(f"data-independent default: max_pairs {d['max_pairs']}, epsilon {_f(d['epsilon'])}, threshold "
          f"{d['threshold']}: {d['trips_published']} user-trips, {d['pairs_published']} pairs")
    print(f"note: {r['tuning_note']}")
    print(f"check: {r['budget_command']}")
    if "sheet" in r:
        print(f"wrote {r['sheet']}")
