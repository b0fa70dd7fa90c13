"""``python -m odcore figures --out DIR [--preset ...]``: the paper set, each figure with the JSON that redraws it.

What the command does, as its ``--help`` says it: :data:`odcore.cli.parser.FIGURES_DESCRIPTION`.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from odcore.cli.common import od_from_args, resolve_tz, traces_from_args
from odcore.cli.facts import facts_of
from odcore.cli.parser import FIGURES, FORMATS, TYPICAL
from odcore.cli.release import published_map
from odcore.constants import WEEK
from odcore.errors import ParameterError
from odcore.knock.experiment import KnockConfig, run_experiment
from odcore.knock.timeseries import TimeSeriesConfig, build_timeseries
from odcore.paths import atomic_folder, check_folder_replaceable, pause_for_test
from odcore.privacy.release import Mode, ReleaseConfig, release_with_report
from odcore.report import figures, paper
from odcore.report.figures import FigureSize
from odcore.report.published import public_settings
from odcore.report.safe_csv import csv_text
from odcore.report.zone_compare import compare_zones

# Drawn from the data itself (true counts, every person's traces): their files are named DO_NOT_SHARE_NAME.*. The
# others are drawn from the settings alone or from the published flows only, and may be shared.
DATA_FIGURES = frozenset({"release_probability", "zone_comparison", "knock_auc"})
MANIFEST = "figures_manifest.json"
KIND = "odcore-figures"
_NOT_CONFIG = frozenset({"out", "config", "func", "json", "tz_found"})   # tz_found: what the loader found


def file_stem(name: str, trips: int | str | None = None) -> str:
    """The files' name of figure ``name``: ``DO_NOT_SHARE_`` + name for a figure drawn from the data itself (the
    budget figure too when its person is the data's typical person, ``trips`` = :data:`TYPICAL`).

    >>> file_stem("flow_map"), file_stem("zone_comparison"), file_stem("budget_weeks", "typical")
    ('flow_map', 'DO_NOT_SHARE_zone_comparison', 'DO_NOT_SHARE_budget_weeks')
    """
    return f"DO_NOT_SHARE_{name}" if name in DATA_FIGURES or (name == "budget_weeks" and trips == TYPICAL) else name


def settings(args: argparse.Namespace) -> dict:
    """The command's settings as a ``--config`` object (flag names in snake_case), without the output folder."""
    return {k: v for k, v in vars(args).items() if not k.startswith("_") and k not in _NOT_CONFIG}


def figure_size(args: argparse.Namespace):
    try:
        size = FigureSize.preset(args.preset, dpi=args.dpi)
        if args.size:
            try:
                w, h = (float(v) for v in str(args.size).lower().split("x"))
            except ValueError:
                raise ParameterError(f"--size={args.size!r}: expected WIDTHxHEIGHT in inches, e.g. 3.5x2.8.") from None
            size = FigureSize(w, h, size.dpi, size.font_pt, size.legend)
    except ValueError as exc:
        raise ParameterError(f"--preset/--size/--dpi: {exc}") from None
    return size


def build(name: str, args: argparse.Namespace, data: dict):
    """Figure ``name`` and the table it draws (``data`` caches the loaded traces and OD data between figures)."""
    if name == "fig1_per_count":
        return paper.attack_curve_figure(args.epsilon, "per_metric", max_pairs=args.max_pairs)
    if name == "fig1_per_person":
        return paper.attack_curve_figure(args.epsilon, "user_level", max_pairs=args.max_pairs)
    if name == "budget_weeks":
        who = None
        trips = args.trips
        if trips == TYPICAL:   # the person every page calls typical (odcore.report.facts)
            f, wk = week_facts(args, data)
            trips = f["typical_trips"].value
            who = f"the typical person of week {wk}"
        return paper.budget_weeks_figure(args.epsilon, args.mode, trips=trips, weeks=args.weeks,
                                         max_pairs=args.max_pairs, who=who)
    if name in ("release_probability", "flow_map"):
        table, od, cfg, wk = week_release(args, data)
        if name == "release_probability":
            return paper.release_probability_figure(table["true_count"].to_numpy(), args.epsilon, args.threshold,
                                                    args.mode, max_pairs=args.max_pairs)
        return flow_map(table, od, cfg, wk, args.map_top)
    if name == "zone_comparison":
        traces = data.get("traces") or traces_from_args(args)
        data["traces"] = traces
        specs = [z.strip() for z in str(args.compare_zones).split(",") if z.strip()]
        table = compare_zones(traces.df, specs, epsilon=args.epsilon, threshold=args.threshold, week=args.week,
                              tz=resolve_tz(args, traces.report.format), rng=args.seed)
        return paper.zone_comparison_figure(table, args.epsilon, args.threshold)
    if name == "knock_auc":
        traces = data.get("traces") or traces_from_args(args)
        data["traces"] = traces
        ts = build_timeseries(traces.df, TimeSeriesConfig(tz=resolve_tz(args, traces.report.format)))
        res = run_experiment(ts, KnockConfig(targets=args.knock_targets, classifiers=args.knock_classifiers,
                                             seed=args.seed))
        rows = [{"target": t.target, "classifier": c, "auc": a} for t in res.per_target for c, a in t.auc.items()]
        return paper.knock_auc_figure(pd.DataFrame(rows))
    raise AssertionError(name)  # pragma: no cover - names are checked before


def week_facts(args: argparse.Namespace, data: dict):
    """``(facts, week)``: the facts of the figures' week (:func:`odcore.cli.facts.facts_of`, what ``facts --json``
    prints for the same data, week and settings)."""
    if "facts" not in data:
        _, od, cfg, wk = week_release(args, data)
        data["facts"] = (facts_of(od, wk, cfg, args.seed), wk)
    return data["facts"]


def week_release(args: argparse.Namespace, data: dict):
    """The week's release table (one draw shared by the release-probability chart and the map)."""
    if "release" in data:
        return data["release"]

    traces, od = od_from_args(args)
    data.setdefault("traces", traces)
    pairs = od.pairs
    weeks = sorted(int(x) for x in pairs[WEEK].unique()) if len(pairs) else [0]
    wk = weeks[0] if args.week is None else int(args.week)
    if wk not in weeks:
        raise ParameterError(f"--week={wk} has no trips; weeks with trips: {weeks}.")
    cfg = ReleaseConfig(epsilon=args.epsilon, threshold=args.threshold, mode=Mode(args.mode),
                        max_pairs=args.max_pairs if args.mode == "user_level" else None)
    res = release_with_report(pairs[pairs[WEEK] == wk], cfg, rng=args.seed)
    data["release"] = (res.table, od, cfg, wk)
    return data["release"]


def flow_map(table, od, cfg, wk: int, top: int):
    """The week's published map, as ``release --map`` and the OD release page draw it
    (:func:`odcore.cli.release.published_map`); its table: the places drawn, numbered, and the flows between them."""
    t = table.loc[table["week"].to_numpy() == wk]
    fig = published_map(t, od, cfg, title=f"Published OD flows, week {wk}", top_n=top or None)
    return fig, pd.DataFrame(fig.layout.meta[figures.FLOW_MAP_META]["args"]["flows"])


def _owned(path: Path) -> bool:
    """Whether ``path`` is an earlier ``figures --out`` (its manifest names this command)."""
    try:
        return json.loads((path / MANIFEST).read_text(encoding="utf-8")).get("kind") == KIND
    except (OSError, ValueError, AttributeError):
        return False


def run_figures(args: argparse.Namespace) -> int:
    names = [n.strip() for n in str(args.only).split(",") if n.strip()]
    bad = [n for n in names if n not in FIGURES]
    if bad or not names:
        raise ParameterError(f"--only: unknown figure(s) {bad}; choose among {', '.join(FIGURES)}.")
    fmts = [f.strip().lower() for f in str(args.formats).split(",") if f.strip()]
    if not fmts or any(f not in FORMATS for f in fmts):
        raise ParameterError(f"--formats={args.formats!r}: choose among {', '.join(FORMATS)}.")
    size = figure_size(args)
    out = Path(args.out)
    check_folder_replaceable(out, _owned, what=f"figures --out {out}")   # before any work
    figures.require_browser()
    if args.seed is None:
        args.seed = int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> 1)
    data: dict = {}
    files: dict[str, bytes] = {}
    with figures.image_server():
        for name in names:
            print(f"drawing {name}…", file=sys.stderr, flush=True)
            fig, table = build(name, args, data)
            stem = file_stem(name, args.trips)
            for fmt in fmts:
                files[f"{stem}.{fmt}"] = figures.figure_bytes(fig, fmt, size)
            files[f"{stem}.csv"] = csv_text(table).encode("utf-8")   # spreadsheet-safe (no formula cell)
            cfg = {**settings(args), "only": name}
            if not stem.startswith("DO_NOT_SHARE_"):   # what may be shared: no data path, no seed
                cfg = public_settings(cfg)
            files[f"{stem}.json"] = (json.dumps(cfg, indent=2, default=str) + "\n").encode("utf-8")
    manifest = {"kind": KIND, "files": sorted(files),
                "do_not_share": sorted(f for f in files if f.startswith("DO_NOT_SHARE_"))}
    # one commit: the whole set is written in a new folder beside --out and swapped in at one rename
    # (odcore.paths.atomic_folder), so a reader sees the previous set or this one, never a mix
    try:
        with atomic_folder(out, _owned, what=f"figures --out {out}") as tmp:
            for fname, blob in files.items():
                (tmp / fname).write_bytes(blob)
                pause_for_test("figures")
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise ParameterError(f"--out {out}: cannot write ({exc}).") from None
    for f in files:
        print(out / f)
    return 0
