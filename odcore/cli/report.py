"""``python -m odcore report``: the designer's release of one week and its two reports.

The designer (:func:`odcore.privacy.design.design_report`) chooses the settings that give at most
``--target-epsilon`` per person and week (δ over ``--weeks`` weeks at most ``--target-delta``); the week is released
with them and ``--out`` receives two self-contained HTML files: ``report.html`` (may be shared: built from the
published table and the public settings only, :mod:`odcore.report.release_report`) and
``DO_NOT_SHARE_report.html`` (adds the release against the truth, the designer's full verdict and the audit,
:mod:`odcore.report.private_report`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from odcore.cli import print_json
from odcore.cli.common import od_from_args
from odcore.constants import WEEK
from odcore.errors import ParameterError
from odcore.paths import atomic_folder, check_folder_replaceable
from odcore.privacy.design import Goal, design_report
from odcore.privacy.release import Mode, ReleaseConfig
from odcore.report.facts import week_trips
from odcore.report.figures import require_browser
from odcore.report.plain_json import jsonable
from odcore.report.private_report import release_reports

REPORT_FILES = ("report.html", "DO_NOT_SHARE_report.html")
_MARK = "by OD Privacy Lab (odcore.report.release_report)"


def _owned(path: Path) -> bool:
    """An earlier output of this command: only its two files, the shareable one carrying its mark."""
    present = {q.name for q in path.iterdir()}
    if not present <= set(REPORT_FILES) or REPORT_FILES[0] not in present:
        return False
    try:
        return _MARK in (path / REPORT_FILES[0]).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False


def run(args: argparse.Namespace) -> int:
    if not args.out:
        raise ParameterError("--out DIR is required (the folder for report.html and DO_NOT_SHARE_report.html).")
    out = Path(args.out)
    check_folder_replaceable(out, _owned, what=f"--out {out}")
    if not args.no_map:
        require_browser()   # before any work: the map needs Chrome or Chromium (or give --no-map)
    _, od = od_from_args(args)
    if not od.stats.get("pairs_available", True):
        raise ParameterError("report needs each person's pairs (traces, not an OD counts folder): the designer, the "
                             "contribution bound and the audit read them.")
    weeks_present = sorted(int(x) for x in od.pairs[WEEK].unique())
    if not weeks_present:
        raise ParameterError("the data has no trips: nothing to release.")
    week = weeks_present[0] if args.week is None else int(args.week)
    if week not in weeks_present:
        raise ParameterError(f"--week={week} has no trips; weeks with trips: {weeks_present}.")
    goal = Goal(kind="week", epsilon=args.target_epsilon, delta=args.target_delta, weeks=args.weeks)
    trips = week_trips(od.user_week, week)   # the week's people: those with a trip (odcore.report.facts)
    rep = design_report(goal, od.week_pairs(week), trips, week=week, max_pairs=args.max_pairs, rng=args.seed)
    cfg = ReleaseConfig(epsilon=rep["epsilon"], threshold=rep["threshold"], mode=Mode.USER_LEVEL,
                        max_pairs=rep["max_pairs"])
    r = release_reports(od, week, cfg, weeks=args.weeks, delta=args.target_delta, goal_epsilon=args.target_epsilon,
                        design=rep, seed=args.seed, with_map=not args.no_map, audit=not args.no_audit,
                        title=args.title)
    try:
        with atomic_folder(out, _owned, what=f"--out {out}") as t:
            (t / REPORT_FILES[0]).write_text(r.public_html, encoding="utf-8")
            (t / REPORT_FILES[1]).write_text(r.private_html, encoding="utf-8")
    except OSError as exc:
        raise ParameterError(f"--out {out}: cannot write ({exc}).") from None
    m = r.measures
    summary = {"week": week, "settings": r.settings.to_dict(), "verdict": rep["verdict"]["headline"],
               "pairs_published": m["pairs_published"], "smape": m.get("smape"), "jsd": m.get("jsd"),
               "top_n_coverage": {n: t["coverage"] for n, t in m.get("top_n", {}).items()},
               "files": {"shareable": str(out / REPORT_FILES[0]), "do_not_share": str(out / REPORT_FILES[1])}}
    if args.json:
        print_json(jsonable(summary))
        return 0
    s = r.settings
    print(f"designer: max_pairs {s.max_pairs}, epsilon {s.epsilon:.4g} (noise scale {s.noise_scale:.4g}), threshold "
          f"{s.threshold:g}: {rep['verdict']['headline']}")
    print(f"week {week}: {m['pairs_published']} of {m['pairs_total']} pairs published; SMAPE {m.get('smape', 0):.3f}, "
          f"Jensen-Shannon {m.get('jsd', 0):.3f}")
    print(f"may be shared: {out / REPORT_FILES[0]}")
    print(f"DO NOT SHARE (true counts, audit): {out / REPORT_FILES[1]}")
    return 0
