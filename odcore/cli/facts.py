"""``python -m odcore facts``: every quantity the app's pages read about a week's release, each with its definition
and, where two numbers differ by design, the reason (:mod:`odcore.report.facts`)."""

from __future__ import annotations

import argparse

from odcore.cli import print_json
from odcore.cli.common import od_from_args
from odcore.errors import ParameterError
from odcore.od.pairs import bound_contributions
from odcore.privacy.release import Mode, ReleaseConfig
from odcore.report.facts import facts_json, located_in_week, week_facts


def facts_of(od, week: int, cfg, seed: int | None) -> dict:
    """The facts of ``week`` of the OD data ``od`` under the release ``cfg`` (``seed``: of the per-person bounding):
    what ``facts`` prints and the figures of ``figures`` read."""
    has_pairs = od.stats.get("pairs_available", True)
    pairs = od.week_pairs(week) if has_pairs else None
    attack_pairs, counts = pairs, None
    if has_pairs and cfg.mode is Mode.USER_LEVEL:
        attack_pairs, _ = bound_contributions(pairs, cfg.max_pairs, rng=seed)
    elif has_pairs:
        counts = od.counts.loc[od.counts["week"].to_numpy() == week]
    return week_facts(pairs, week=week, release=cfg, attack_pairs=attack_pairs, counts=counts,
                      people_data=od.n_users if has_pairs else None,
                      people_located=located_in_week(od.user_week, week) if has_pairs else None)


def run(args: argparse.Namespace) -> int:
    cfg = ReleaseConfig(epsilon=args.epsilon, threshold=args.threshold, mode=args.mode, max_pairs=args.max_pairs)
    _traces, od = od_from_args(args)
    week = od.busiest_week()[0] if args.week is None else int(args.week)
    if not 0 <= week < od.n_weeks:
        raise ParameterError(f"--week must be in [0, {od.n_weeks}) for {args.input}, got --week {week}.")
    facts = facts_of(od, week, cfg, args.seed)
    if args.json:
        print_json({"input": str(args.input), "week": week, "release": cfg.to_dict(), "facts": facts_json(facts)})
        return 0
    print(f"week {week}, {cfg.mode.value}, epsilon {cfg.epsilon:g}, threshold {cfg.threshold:g}")
    for f in facts.values():
        print(f"{f.name}: {f.text}  ({f.why})")
    return 0
