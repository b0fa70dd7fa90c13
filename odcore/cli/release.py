"""``python -m odcore budget`` and ``python -m odcore release``.

``budget`` prints the privacy budget of the weekly release for one user (:func:`odcore.privacy.accounting.budget`).
``release`` loads traces, builds weekly unique OD pairs, runs the Laplace + threshold release
(:func:`odcore.privacy.release.release_with_report`) and writes what may be shared (the published pairs only, with zone
centroids and names; zones.geojson; release.json, the record and guarantee; guarantee_sheet.html) to ``--out``, and the
analysis table with true counts and noise only to ``--analysis-out`` (named DO_NOT_SHARE).

Both accept ``--config FILE.json`` whose keys are the flags' names in snake_case (``--max-pairs`` -> ``max_pairs``),
as exported by the dashboard. Precedence: explicit flags > config file > defaults.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from odcore.cli import print_json
from odcore.cli.common import engine_streams, od_from_args
from odcore.constants import CELL, PRIVATE_RECORD, PRIVATE_SHEET, PUBLISHED_FILES, PUBLISHED_KIND, USER, WEEK
from odcore.data.fingerprint import trace_fingerprint
from odcore.errors import ParameterError
from odcore.od.bounding import bounding_key
from odcore.od.odtable import is_counts_folder
from odcore.paths import atomic_folder, atomic_output, check_folder_replaceable, pause_for_test
from odcore.privacy.accounting import BudgetConfig, budget, delta_parts
from odcore.privacy.release import (
    ANALYSIS_NOTICE,
    Mode,
    ReleaseConfig,
    published_table,
    release_bounded_counts_with_report,
    release_counts_with_report,
    release_csv_table,
    release_with_report,
)
from odcore.privacy.utility import release_utility, utility_by_week
from odcore.report import figures
from odcore.report.plain_json import jsonable
from odcore.report.published import (
    document_text,
    guarantee_part,
    private_record,
    private_sheet,
    public_record,
    public_sheet,
    published_hashes,
    published_weeks,
    release_document,
    write_published,
)
from odcore.report.safe_csv import write_csv
from odcore.report.sheet import data_fingerprint
from odcore.space.zones import add_zone_names, zones_summary

_NOT_CONFIG = frozenset({"help", "config", "json", "func"})  # not settings


def _settings(args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    """The command's settings (defaults < ``--config`` < explicit flags, merged by :mod:`odcore.cli`) and notes."""
    s = {k: v for k, v in vars(args).items() if not k.startswith("_") and k not in _NOT_CONFIG}
    notes: list[str] = []
    if s.get("mode") != "user_level" and s.get("max_pairs") is not None:
        if "max_pairs" in getattr(args, "_explicit", ()):
            raise ParameterError(f"--max-pairs={s['max_pairs']} needs --mode user_level (per_metric mode bounds each "
                                 "user to 1 per pair and does not cap the number of pairs).")
        notes.append(f"config max_pairs={s['max_pairs']} is only used with mode user_level (ignored)")
        s["max_pairs"] = None
    return s, notes


def _note(notes: list[str]) -> None:
    for n in notes:
        print(f"note: {n}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------------------------
# budget
# ---------------------------------------------------------------------------------------------------------------

def run_budget(args: argparse.Namespace) -> int:
    s, notes = _settings(args)
    given = getattr(args, "_explicit", frozenset()) | getattr(args, "_from_config", frozenset())
    if s["mode"] == "user_level" and s.get("max_pairs") is None:
        raise ParameterError("mode user_level needs --max-pairs (an integer >= 1).")
    parts = delta_rule(s, given, notes)
    _note(notes)
    cfg = BudgetConfig(epsilon=s["epsilon"], threshold=parts.threshold, trips=s["trips"], weeks=s["weeks"],
                       delta=parts.laplace, max_pairs=s["max_pairs"] if s["mode"] == "user_level" else None,
                       total_interval=s["total_interval"])
    out = {"mode": s["mode"], **budget(cfg), "delta_parts": parts.to_dict()}
    if args.json:
        print_json(out)
    else:
        _print_budget(out)
        print("\n".join(parts.lines()))
    for w in parts.warnings():
        print(f"warning: {w}", file=sys.stderr)
    return 0


def delta_rule(s: dict, given: frozenset, notes: list[str]):
    """The release's δ split (:func:`odcore.privacy.accounting.delta_parts`) from the settings ``s`` (``epsilon``,
    ``delta``, ``weeks``, ``mode``, ``max_pairs``, ``threshold``, optionally ``trips``): the threshold is fitted in
    user-level mode unless given (``"threshold"`` in ``given``), and ``s["threshold"]`` is set to the one used."""
    user = s["mode"] == "user_level"
    tau = s["threshold"] if ("threshold" in given or not user) else None
    parts = delta_parts(s["epsilon"], s["delta"], s["weeks"], max_pairs=s["max_pairs"] if user else None,
                        threshold=tau, trips=s.get("trips") or 1)
    if user and tau is None:
        notes.append(f"user_level: threshold {parts.threshold:g} (fitted: the smallest whole number whose threshold "
                     f"part of delta over {s['weeks']} weeks is <= {s['delta']:g}/2; give --threshold to override)")
    s["threshold"] = int(parts.threshold) if parts.threshold == int(parts.threshold) else parts.threshold
    return parts


def _fmt(x, spec: str = ".4g") -> str:
    return "n/a" if x is None else format(x, spec)


def _print_budget(b: dict) -> None:
    eps, n, w, d = b["epsilon"], b["trips"], b["weeks"], b["delta"]
    print(f"Per metric (one week, one OD pair): epsilon = {eps:g}, delta = {b['delta_per_metric']:.3g}; "
          f"posterior <= {b['posterior_bound_per_metric']:.3f} (prior 0.5)")
    print(f"Per user-week, {n} unique trips (basic composition): epsilon = {b['epsilon_user_week']:g}, "
          f"delta = {b['delta_user_week']:.3g}")
    print(f"  advanced (DRV, delta' = {d:g}): epsilon = {b['epsilon_user_week_advanced']:.4g}, "
          f"delta = {b['delta_user_week_advanced']:.3g}")
    print(f"  tight (exact PLD, delta = {d:g}): epsilon = {_fmt(b['epsilon_user_week_tight'])}, "
          f"delta incl. thresholding = {b['delta_user_week_tight']:.3g}; Renyi-DP bound "
          f"{b['epsilon_user_week_rdp']:.4g}")
    tight_tot = b["epsilon_user_total_tight"]
    if tight_tot is None:
        tight_txt = f"not computed (k = {n * w} > {b['tight_k_max']})"
    elif b["tight_total_method"] == "bracket":
        tight_txt = f"in [{b['epsilon_user_total_tight_lower']:.5g}, {tight_tot:.5g}]"
    else:
        tight_txt = _fmt(tight_tot, ".5g")
    print(f"Over {w} weeks: basic epsilon = {b['epsilon_user_total']:g}, advanced = "
          f"{b['epsilon_user_total_advanced']:.5g}, Renyi-DP = {b['epsilon_user_total_rdp']:.5g}, tight = {tight_txt}")
    if "epsilon_user_week_bounded" in b:
        _print_user_level(b)


def _print_user_level(b: dict) -> None:
    w, d = b["weeks"], b["delta"]
    print(f"Per person (max_pairs = {b['max_pairs']}, noise scale {b['noise_scale_bounded']:g}, threshold "
          f"{b['threshold']:g}): a person changes at most {b['max_pairs']} counts per week by 1, each with "
          f"Laplace noise of parameter {b['epsilon_per_count_bounded']:.4g}")
    print(f"  partition selection: delta {b['delta_partition_week_bounded']:.3g} per week, "
          f"{b['delta_partition_total_bounded']:.3g} over {w} weeks (threshold for delta <= {d:g}: "
          f"{b['threshold_for_delta_week_bounded']:.1f} per week, {b['threshold_for_delta_total_bounded']:.1f} "
          f"over {w} weeks)")
    for unit, label in (("week", "per week"), ("total", f"over {w} weeks")):
        tight = b[f"epsilon_user_{unit}_bounded_tight"]
        lo = b.get(f"epsilon_user_{unit}_bounded_tight_lower")
        tight_txt = (f"in [{lo:.5g}, {tight:.5g}]" if lo is not None and tight is not None and lo != tight
                     else _fmt(tight, ".5g"))
        print(f"  {label}: basic epsilon = {b[f'epsilon_user_{unit}_bounded']:.4g} (delta "
              f"{b[f'delta_user_{unit}_bounded']:.3g}); advanced {b[f'epsilon_user_{unit}_bounded_advanced']:.4g}, "
              f"Renyi {b[f'epsilon_user_{unit}_bounded_rdp']:.4g}, tight {tight_txt} "
              f"(delta {b[f'delta_user_{unit}_bounded_tight']:.3g} = {d:.3g} Laplace part + threshold part)")


# ---------------------------------------------------------------------------------------------------------------
# release
# ---------------------------------------------------------------------------------------------------------------

ANALYSIS_FILES = ("DO_NOT_SHARE_analysis.csv", "DO_NOT_SHARE_analysis.parquet", PRIVATE_RECORD, PRIVATE_SHEET,
                  "DO_NOT_SHARE_summary.json")
ANALYSIS_KIND = "odcore-analysis-do-not-share"


def _folder_of(kind: str, files: tuple[str, ...]):
    """``owned(path)``: the folder holds only ``files`` and its JSON names ``kind`` (a previous output of the same
    command, which a new run replaces whole)."""

    def owned(path: Path) -> bool:
        present = {p.name for p in path.iterdir()}
        if not present <= set(files):
            return False
        js = path / files[-1] if files[-1].endswith(".json") else path / "release.json"
        try:
            return json.loads(js.read_text(encoding="utf-8")).get("kind") == kind
        except (OSError, ValueError, AttributeError):
            return False

    return owned


def _is_counts_input(s: dict) -> bool:
    return is_counts_folder(s.get("input"))


def run_release(args: argparse.Namespace) -> int:
    s, notes = _settings(args)
    given = getattr(args, "_explicit", frozenset()) | getattr(args, "_from_config", frozenset())
    if not s.get("out"):
        raise ParameterError("--out DIR is required (the folder for the published table: published.csv, "
                             "published.parquet, zones.geojson, release.json, guarantee_sheet.html).")
    if s["mode"] == "user_level" and s.get("max_pairs") is None:
        raise ParameterError("mode user_level needs --max-pairs (an integer >= 1).")
    out_dir = Path(s["out"])
    an_dir = Path(s["analysis_out"]) if s.get("analysis_out") else None
    if an_dir is not None:
        a, b = out_dir.resolve(), an_dir.resolve()
        if a == b or a in b.parents or b in a.parents:
            raise ParameterError(f"--analysis-out {an_dir} must be a folder apart from --out {out_dir} (the analysis "
                                 "table must not travel with the published one).")
    # refused before any work: a folder holding someone else's files is never touched
    check_folder_replaceable(out_dir, _folder_of(PUBLISHED_KIND, PUBLISHED_FILES), what=f"--out {out_dir}")
    if an_dir is not None:
        check_folder_replaceable(an_dir, _folder_of(ANALYSIS_KIND, ANALYSIS_FILES), what=f"--analysis-out {an_dir}")
    parts = delta_rule(s, given, notes)
    _note(notes)
    for w in parts.warnings():
        print(f"warning: {w}", file=sys.stderr)
    mode = Mode(s["mode"])
    cfg = ReleaseConfig(epsilon=s["epsilon"], threshold=s["threshold"], mode=mode, max_pairs=s["max_pairs"])
    ns = argparse.Namespace(**s)
    engine = s.get("engine") or "memory"
    in_engine = mode is Mode.USER_LEVEL and engine != "memory" and not _is_counts_input(s)
    if in_engine:   # the engine bounds each person's pairs in SQL; only per-pair counts come back

        if s.get("seed") is None:
            s["seed"] = int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> 1)
        traces, od = od_from_args(ns, keep_pairs=False, fingerprint=True,
                                  bound=(cfg.max_pairs, bounding_key(np.random.default_rng(s["seed"]))))
    elif engine == "spark" and engine_streams(ns):   # per metric from the counts: no per-person table comes back
        traces, od = od_from_args(ns, keep_pairs=False, aggregates_only=True, fingerprint=True)
    else:
        traces, od = od_from_args(ns, fingerprint=True)
    pairs = od.pairs
    week = s.get("week")
    if week is not None:
        weeks_present = sorted(int(x) for x in (pairs if len(pairs) else od.counts)[WEEK].unique())
        if int(week) not in weeks_present:
            raise ParameterError(f"--week={week} has no trips; weeks with trips: {weeks_present}.")
        pairs = pairs[pairs[WEEK] == int(week)]
    if in_engine:
        bounded = od.stats["bounded_counts"]
        if week is not None:
            bounded = bounded[bounded[WEEK] == int(week)]
        res = release_bounded_counts_with_report(bounded, cfg, s["seed"],
                                                 od.stats["bounding"] if week is None else None)
        res.report["bounded_in"] = engine
    elif od.stats.get("pairs_available", True):
        res = release_with_report(pairs, cfg, rng=s["seed"])
    else:   # an OD counts folder, or Spark's counts: the per-metric release from them (same draws as from the pairs)

        counts = od.counts if week is None else od.counts[od.counts[WEEK] == int(week)]
        res = release_counts_with_report(counts, cfg, rng=s["seed"])
        if od.stats.get("pair_users") is not None:   # the engine's pairs: unique, so rows in = contributions
            res.report.pop("from_counts", None)
            res.report["rows_in"] = res.report["contributions_in"]
            res.report["users"] = od.stats["pair_users"] if week is None else None   # people with a pair
    table = res.table
    cent = od.centroids().set_index(CELL)
    pub = add_zone_names(published_table(table, od.centroids(), od.week_starts), od.grid)
    pub_cells = np.union1d(pub["origin"].to_numpy(np.int64), pub["destination"].to_numpy(np.int64))

    # unique trips per user-week from the histogram (the same figures whether or not the user-weeks are here):
    # the data's own typical and busiest person, for the private record and the analysis summary only
    ut = od.unique_trips_figures(None if week is None else int(week))
    n_typ = int(max(1, round(ut["median"]))) if ut["user_weeks"] else 1
    n_max = int(max(1, ut["max"])) if ut["user_weeks"] else 1
    n_weeks = int(table[WEEK].nunique()) if len(table) else 1
    bcfg_kw = {"epsilon": cfg.epsilon, "threshold": cfg.threshold, "weeks": s["weeks"], "max_pairs": cfg.max_pairs,
               "delta": parts.laplace}
    b_typ = budget(BudgetConfig(trips=n_typ, **bcfg_kw))
    # the public figures: the publisher's assumed trips (--trips), never the data's
    b_pub = jsonable(budget(BudgetConfig(trips=int(s["trips"]), **bcfg_kw)))
    settings = {k: v for k, v in s.items() if k not in ("out", "analysis_out", "seed", "map", "map_top",
                                                        "map_size", "map_dpi")}
    zones_spec = zones_summary(od.grid)["spec"] or f"{od.grid.cell_km2:g} km² square grid"
    public_rec = public_record(weeks=published_weeks(pub), zones=zones_spec, settings=settings, trips=s["trips"])
    public = release_document(
        pub, record=public_rec,
        release={"epsilon": cfg.epsilon, "threshold": cfg.threshold, "mode": mode.value, "max_pairs": cfg.max_pairs,
                 "noise_scale": cfg.scale},
        guarantee=guarantee_part(user_level=mode is Mode.USER_LEVEL, delta_parts=parts.to_dict(), budget=b_pub))
    sheet = public_sheet(b_pub, record=public_rec, delta_parts=parts.to_dict())
    private = None
    if an_dir is not None:   # the data holder's record and sheet: exact figures of the data, written on request
        if getattr(traces, "fingerprint", None):   # streamed (a Cabspotting folder; files an engine read)
            fingerprint, rows, users = traces.fingerprint, traces.kept["rows"], traces.n_users
        elif traces is not None and hasattr(traces, "df"):
            tdf = traces.df
            fingerprint = trace_fingerprint(tdf)
            rows, users = len(tdf), int(tdf[USER].nunique()) if len(tdf) else 0
        else:
            fingerprint, rows, users = data_fingerprint(od.counts), None, None
        private = private_record(
            dataset=getattr(getattr(traces, "report", None), "source", None) or s.get("input"),
            fingerprint=fingerprint, rows=rows, users=users, week_starts=od.week_starts,
            weeks_with_trips=sorted(int(x) for x in table[WEEK].unique()) if len(table) else [],
            zones=zones_spec, settings=settings,
            unique_trips={"median": ut["median"], "max": ut["max"], "person_weeks": ut["user_weeks"]},
            pairs_observed=len(table), pairs_published=len(pub))
        private_html = private_sheet(jsonable(b_typ), record=private, delta_parts=parts.to_dict())
    summary = {
        "kind": ANALYSIS_KIND,
        "notice": ANALYSIS_NOTICE,
        "config": {**{k: v for k, v in s.items() if k not in ("out", "analysis_out")}, **cfg.to_dict()},
        "traces": traces.summary(),
        "grid": {"cell_km2": od.grid.cell_km2, "cells_used": len(cent)},
        "zones": zones_summary(od.grid),
        "od": od.summary(threshold=math.ceil(cfg.threshold)),
        "weeks": {"count": n_weeks, "week_starts": list(od.week_starts), "selected": week},
        "release": res.report,
        "delta": parts.to_dict(),
        "utility": release_utility(table),
        "utility_by_week": utility_by_week(table).to_dict(orient="records") if len(table) else [],
        "unique_trips_per_user_week": {"median": ut["median"], "max": ut["max"], "user_weeks": ut["user_weeks"]},
        "budget_typical_user": b_typ,
        "budget_max_user": budget(BudgetConfig(trips=n_max, **bcfg_kw)),
        "budget_assumed_trips": b_pub,
        "published": {"folder": str(out_dir), "files": list(PUBLISHED_FILES)},
        "files": {"analysis": str(an_dir) if an_dir else None,
                  **{f.split(".")[0]: str(out_dir / f) for f in PUBLISHED_FILES}},
    }
    maps = _map_images(s, od, table, cfg, week) if s.get("map") else []
    if maps:
        summary["files"]["map"] = [str(p) for p, _ in maps]
    summary = jsonable(summary)
    public = jsonable(public)
    # All or nothing (odcore.paths.atomic_folder): each folder is written beside its place and swapped in whole, so
    # a run stopped at any moment leaves the previous folder or the new one, never a part. The two folders are
    # swapped one after the other (they must not travel together): the private record names the SHA-256 of the
    # published files it goes with, so a pair left by a run stopped between the swaps is refused by
    # odcore.report.published.check_release rather than read as one release.
    try:
        with contextlib.ExitStack() as stack:
            for p, write in maps:   # drawn first, renamed into place only once both folders are written
                write(p, stack.enter_context(atomic_output(p)))
            with atomic_folder(out_dir, _folder_of(PUBLISHED_KIND, PUBLISHED_FILES), what=f"--out {out_dir}") as t:
                write_published(t, pub, zones=od.grid, cells=pub_cells, document=public, sheet=sheet)
                if an_dir is not None:
                    private["published_sha256"] = published_hashes(t)
                    with atomic_folder(an_dir, _folder_of(ANALYSIS_KIND, ANALYSIS_FILES),
                                       what=f"--analysis-out {an_dir}") as ta:
                        full = add_zone_names(release_csv_table(table, od.centroids(), od.week_starts), od.grid)
                        write_csv(full, ta / ANALYSIS_FILES[0], first_line=ANALYSIS_NOTICE)
                        full.to_parquet(ta / ANALYSIS_FILES[1], index=False)
                        (ta / PRIVATE_RECORD).write_text(document_text(private), encoding="utf-8")
                        (ta / PRIVATE_SHEET).write_text(private_html, encoding="utf-8")
                        (ta / ANALYSIS_FILES[-1]).write_text(json.dumps(summary, indent=2, allow_nan=False),
                                                             encoding="utf-8")
                    pause_for_test("release")   # between the swaps: the new analysis folder, the old published one
    except OSError as exc:
        raise ParameterError(f"--out {out_dir}: cannot write ({exc}).") from None
    if args.json:
        print_json({**summary, "published_release": public,
                    **({} if private is None else {"private_record": jsonable(private)})})
    else:
        u, r = summary["utility"], res.report
        print(f"traces: {summary['traces']['users']} users, {summary['traces']['rows']} rows "
              f"({summary['traces']['rows_dropped']} dropped)")
        zd = od.stats.get("rows_dropped", {})
        print(f"zones: {summary['zones']['spec']} ({summary['zones']['n_zones']} zones, {len(cent)} used)"
              + "".join(f"; {n:,} rows dropped: {why}" for why, n in zd.items()))
        print(f"release ({cfg.mode.value}, epsilon={cfg.epsilon:g}, threshold={cfg.threshold:g}, noise scale "
              f"{cfg.scale:g}): {u['pairs_published']} of {u['pairs_total']} OD pairs published "
              f"({_fmt(u['pairs_published_frac'], '.1%')}), {u['trips_published']} of {u['trips_total']} user-trips "
              f"({_fmt(u['trips_published_frac'], '.1%')}); mean relative error "
              f"{_fmt(u['mean_relative_error'], '.3g')}")
        if r.get("contributions_dropped_by_bounding"):
            print(f"bounding dropped {r['contributions_dropped_by_bounding']} of {r['contributions_in']} user-pair "
                  f"contributions ({r['user_weeks_bounded']} user-weeks over {cfg.max_pairs} pairs)")
        print("\n".join(parts.lines()))
        print(f"published (may be shared): {out_dir}/ with {', '.join(PUBLISHED_FILES)}")
        if an_dir is not None:
            print(f"analysis (DO NOT SHARE: true counts, noise, unpublished pairs): {an_dir}/ with "
                  f"{', '.join(ANALYSIS_FILES)}")
    return 0


def _map_images(s: dict, od, table, cfg, week) -> list[tuple[Path, Any]]:
    """``--map FILE[,FILE]``: the week's published flows as an image (odcore.report.figures.flow_map_figure).

    Checks the flags and draws the figure; returns ``(path, write)`` pairs, where ``write(path, tmp)`` renders the
    image into the temporary file ``tmp`` (the caller renames it to ``path`` once every output is written)."""

    try:
        w_in, h_in = (float(v) for v in str(s["map_size"]).lower().split("x"))
    except ValueError:
        raise ParameterError(f"--map-size={s['map_size']!r}: expected WIDTHxHEIGHT in inches, e.g. 8x6.") from None
    paths = [Path(p.strip()) for p in str(s["map"]).split(",") if p.strip()]
    for p in paths:
        if p.suffix.lower().lstrip(".") not in figures.IMAGE_FORMATS:
            raise ParameterError(f"--map {p}: the file name must end in .png, .svg or .pdf.")
    wk = int(week) if week is not None else (int(table["week"].min()) if len(table) else 0)
    t = table.loc[table["week"].to_numpy() == wk]
    start = od.week_starts[wk] if wk < len(od.week_starts) else wk
    fig = published_map(t, od, cfg, title=f"Published OD flows, week {wk} (from {start})",
                        top_n=int(s["map_top"]) or None, size=figures.map_size(w_in, h_in, int(s["map_dpi"])))
    figures.require_browser()   # before anything is written: say at once that the image cannot be drawn

    def write(p: Path, tmp: Path) -> None:
        try:
            figures.write_image(fig, tmp, width_in=w_in, height_in=h_in, dpi=int(s["map_dpi"]))
        except ValueError as exc:
            raise ParameterError(f"--map {p}: {exc}") from None
        except OSError as exc:
            raise ParameterError(f"--map {p}: cannot write ({exc}).") from None

    return [(p, write) for p in paths]


def published_map(t, od, cfg, *, title: str, top_n: int | None, size=None):
    """The week's published map (:func:`odcore.report.figures.published_map_figure`: the published rows only, the
    places and flows of the OD release page at the same settings), shared by ``release --map`` and ``figures``."""
    def polygons(cells):
        g = od.grid.polygons(cells)
        return [np.asarray(q.exterior.coords)[:-1].tolist() for q in g.geometry]

    unit = "per count" if cfg.max_pairs is None else "per person and week"
    cent = od.centroids()
    if getattr(od.grid, "kind", "") == "polygons":   # a zone file's own names label its places
        cent = cent.assign(name=od.grid.names(cent["cell"].to_numpy()))
    return figures.published_map_figure(t, cent, polygons, title=title, top_n=top_n, size=size,
                                        settings=f"ε = {cfg.epsilon:g} {unit}, threshold {cfg.threshold:g}, "
                                                 f"{_zones_words(od.grid)}")


def _zones_words(grid) -> str:
    if getattr(grid, "kind", "") == "polygons":
        return f"{grid.n_cells:,} zones"
    km2 = getattr(grid, "cell_km2", None)
    return f"{km2:g} km² cells" if km2 else f"{getattr(grid, 'n_cells', '?')} zones"
