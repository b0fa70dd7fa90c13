"""``python -m odcore facts``: every quantity the app's pages read about a week's release, each with its definition
and, where two numbers differ by design, the reason (:mod:`odcore.report.facts`)."""

from __future__ import annotations

import argparse

from odcore.cli.common import add_grid_args, add_loader_args, add_release_args, od_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "facts", help="the named quantities of a week's release (people, typical person, ε, δ, bound, attack)",
        description="People in the data and in the week, the typical person and how they are chosen, ε per count "
                    "and per person and week with its δ parts, the bound on any attacker and the optimal attack "
                    "on the typical person with and without suppression: the numbers every page of the app reads.")
    add_loader_args(p)
    add_grid_args(p)
    g = p.add_argument_group("release")
    add_release_args(g)
    g.add_argument("--week", type=int, default=None, help="week (default: the busiest, as the app opens on)")
    g.add_argument("--seed", type=int, default=0, help="seed of the per-person bounding (default %(default)s)")
    g.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def facts_of(od, week: int, cfg, seed: int | None) -> dict:
    """The facts of ``week`` of the OD data ``od`` under the release ``cfg`` (``seed``: of the per-person bounding):
    what ``facts`` prints and the figures of ``figures`` read."""
    from odcore.od.pairs import bound_contributions
    from odcore.privacy.release import Mode
    from odcore.report.facts import located_in_week, week_facts

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
    from odcore.cli import print_json
    from odcore.errors import ParameterError
    from odcore.privacy.release import ReleaseConfig
    from odcore.report.facts import facts_json

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
