"""``python -m odcore budget`` and ``python -m odcore release``.

``budget`` prints the privacy budget of the weekly release for one user (:func:`odcore.privacy.accounting.budget`).
``release`` loads traces, builds weekly unique OD pairs, runs the Laplace + threshold release
(:func:`odcore.privacy.release.release_with_report`) and writes the released table (CSV and Parquet, with zone centroids and
names), the used zones' geometry (zones.geojson) and a JSON summary.

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

from odcore.errors import ParameterError
from odcore.paths import atomic_output

# Keys the dashboard exports that a command does not use: accepted in --config, reported on stderr, ignored.
_IGNORED_BUDGET = frozenset({"dataset", "week", "cell_km2", "zones", "seed"})
_IGNORED_RELEASE = frozenset({"dataset"})
_NOT_CONFIG = frozenset({"help", "config", "json", "func"})  # not settings


def register(sub: argparse._SubParsersAction) -> None:
    pb = sub.add_parser(
        "budget", help="privacy budget of the weekly OD release for one user (per metric, per week, total)",
        description="Privacy budget of the Laplace + threshold weekly OD release: per metric (Bassolas et al.), "
                    "per user-week and over weeks by basic, advanced (Dwork-Rothblum-Vadhan) and tight (exact "
                    "privacy-loss distribution) composition, and the posterior bound e^eps/(1+e^eps).")
    pb.add_argument("--epsilon", type=float, default=0.66, help="per-metric Laplace epsilon (default %(default)s)")
    pb.add_argument("--threshold", type=float, default=100, help="publish iff noisy count >= this (default %(default)s)")
    pb.add_argument("--trips", type=int, default=70,
                    help="unique trips of one user in one week (default %(default)s, Houssiau et al.)")
    pb.add_argument("--weeks", type=int, default=52, help="number of weekly releases (default %(default)s)")
    pb.add_argument("--delta", type=float, default=1e-6,
                    help="delta for the advanced and tight epsilon (default %(default)s)")
    pb.add_argument("--mode", default="per_metric", choices=["per_metric", "user_level"],
                    help="user_level adds the budget of the contribution-bounded release (default %(default)s)")
    pb.add_argument("--max-pairs", type=int, default=None,
                    help="user-level contribution bound (unique pairs per user-week); needs --mode user_level")
    pb.add_argument("--total-interval", type=float, default=1e-3,
                    help="loss-grid step of the tight epsilon over many weeks (bracket width <= 2*weeks*step; "
                         "0 skips it; default %(default)s)")
    _common_flags(pb)
    pb.set_defaults(func=run_budget, _config_ignored=_IGNORED_BUDGET)

    pr = sub.add_parser(
        "release", help="run the Laplace + threshold release on traces; write the OD table and a JSON summary",
        description="Load traces, build weekly unique OD pairs on a square grid, add Laplace noise to the "
                    "distinct-user counts and publish pairs whose noisy count is >= the threshold. Writes "
                    "release.csv, release.parquet (with cell centroids) and summary.json to --out.")
    from odcore.cli.common import add_grid_args, add_loader_args, add_release_args

    add_loader_args(pr)
    add_grid_args(pr)
    g = pr.add_argument_group("release")
    add_release_args(g)
    g.add_argument("--week", type=int, default=None, help="release only this week number (default: every week)")
    g.add_argument("--seed", type=int, default=None, help="random seed (same seed, same output)")
    g.add_argument("--out", default=None, help="output folder (created); required")
    m = pr.add_argument_group("flow map image")
    m.add_argument("--map", default=None, metavar="FILE[,FILE]",
                   help="also draw the published flows of the week (--week, default the first) as FILE.png, .svg or "
                        ".pdf, with legend, scale bar and title; several files separated by commas")
    m.add_argument("--map-top", type=int, default=300, help="draw the N largest flows (default %(default)s)")
    m.add_argument("--map-size", default="8x6", metavar="WxH",
                   help="image size in inches (default %(default)s)")
    m.add_argument("--map-dpi", type=int, default=300, help="PNG resolution (default %(default)s)")
    _common_flags(pr)
    pr.set_defaults(func=run_release, _config_ignored=_IGNORED_RELEASE)


def _common_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


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
    from odcore.cli import print_json
    from odcore.privacy.accounting import BudgetConfig, budget

    s, notes = _settings(args)
    given = getattr(args, "_explicit", frozenset()) | getattr(args, "_from_config", frozenset())
    if s["mode"] == "user_level" and s.get("max_pairs") is not None and "threshold" not in given:
        from odcore.privacy.accounting import default_user_threshold

        s["threshold"] = default_user_threshold(s["epsilon"], s["max_pairs"], s["delta"], s["weeks"])
        notes.append(f"user_level: threshold {s['threshold']} (the smallest whole number whose partition-selection "
                     f"delta over {s['weeks']} weeks is <= {s['delta']:g}; give --threshold to override)")
    _note(notes)
    cfg = BudgetConfig(epsilon=s["epsilon"], threshold=s["threshold"], trips=s["trips"], weeks=s["weeks"],
                       delta=s["delta"], max_pairs=s["max_pairs"] if s["mode"] == "user_level" else None,
                       total_interval=s["total_interval"])
    if s["mode"] == "user_level" and cfg.max_pairs is None:
        raise ParameterError("mode user_level needs --max-pairs (an integer >= 1).")
    out = {"mode": s["mode"], **budget(cfg)}
    if args.json:
        print_json(out)
    else:
        _print_budget(out)
    return 0


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
              f"(delta {b[f'delta_user_{unit}_bounded_tight']:.3g} = {d:g} + partition selection)")


# ---------------------------------------------------------------------------------------------------------------
# release
# ---------------------------------------------------------------------------------------------------------------

def run_release(args: argparse.Namespace) -> int:
    import numpy as np

    from odcore.cli import print_json
    from odcore.cli.common import od_from_args
    from odcore.constants import CELL, UNIQUE_TRIPS, WEEK
    from odcore.privacy.accounting import BudgetConfig, budget
    from odcore.privacy.release import Mode, ReleaseConfig, release_csv_table, release_with_report
    from odcore.privacy.utility import release_utility, utility_by_week
    from odcore.space.zones import add_zone_names, write_zone_geometry, zones_summary

    s, notes = _settings(args)
    _note(notes)
    if not s.get("out"):
        raise ParameterError("--out DIR is required (the folder for release.csv, release.parquet, summary.json).")
    mode = Mode(s["mode"]) if s["mode"] in ("per_metric", "user_level") else s["mode"]
    cfg = ReleaseConfig(epsilon=s["epsilon"], threshold=s["threshold"], mode=mode, max_pairs=s["max_pairs"])
    ns = argparse.Namespace(**s)
    traces, od = od_from_args(ns)
    pairs = od.pairs
    week = s.get("week")
    if week is not None:
        weeks_present = sorted(int(x) for x in (pairs if len(pairs) else od.counts)[WEEK].unique())
        if int(week) not in weeks_present:
            raise ParameterError(f"--week={week} has no trips; weeks with trips: {weeks_present}.")
        pairs = pairs[pairs[WEEK] == int(week)]
    if od.stats.get("pairs_available", True):
        res = release_with_report(pairs, cfg, rng=s["seed"])
    else:   # an OD counts folder: the per-metric release from the counts (same draws as from the pairs)
        from odcore.privacy.release import release_counts_with_report

        counts = od.counts if week is None else od.counts[od.counts[WEEK] == int(week)]
        res = release_counts_with_report(counts, cfg, rng=s["seed"])
    table = res.table
    # cell centroids and week start dates (Bassolas et al.: ~1.3 km² grid cells)
    cent = od.centroids().set_index(CELL)
    out_table = release_csv_table(table, od.centroids(), od.week_starts)
    out_table = add_zone_names(out_table, od.grid)
    out_dir = Path(s["out"])

    uw = od.user_week
    if week is not None:
        uw = uw[uw[WEEK] == int(week)]
    trips = uw[UNIQUE_TRIPS].to_numpy() if len(uw) else np.zeros(0)
    n_typ = int(max(1, round(float(np.median(trips))))) if len(trips) else 1
    n_max = int(max(1, trips.max())) if len(trips) else 1
    n_weeks = int(table[WEEK].nunique()) if len(table) else 1
    bcfg_kw = {"epsilon": cfg.epsilon, "threshold": cfg.threshold, "weeks": max(n_weeks, 1),
               "max_pairs": cfg.max_pairs}
    summary = {
        "config": {**{k: v for k, v in s.items() if k not in ("out",)}, **cfg.to_dict()},
        "traces": traces.summary(),
        "grid": {"cell_km2": od.grid.cell_km2, "cells_used": len(cent)},
        "zones": zones_summary(od.grid),
        "od": od.summary(threshold=math.ceil(cfg.threshold)),
        "weeks": {"count": n_weeks, "week_starts": list(od.week_starts), "selected": week},
        "release": res.report,
        "utility": release_utility(table),
        "utility_by_week": utility_by_week(table).to_dict(orient="records") if len(table) else [],
        "unique_trips_per_user_week": {"median": float(np.median(trips)) if len(trips) else None,
                                       "max": int(trips.max()) if len(trips) else None,
                                       "user_weeks": len(trips)},
        "budget_typical_user": budget(BudgetConfig(trips=n_typ, **bcfg_kw)),
        "budget_max_user": budget(BudgetConfig(trips=n_max, **bcfg_kw)),
        "files": {"csv": str(out_dir / "release.csv"), "parquet": str(out_dir / "release.parquet"),
                  "summary": str(out_dir / "summary.json"), "zones": str(out_dir / "zones.geojson")},
    }
    maps = _map_images(s, od, table, cfg, week) if s.get("map") else []
    if maps:
        summary["files"]["map"] = [str(p) for p, _ in maps]
    summary = jsonable(summary)
    text = json.dumps(summary, indent=2, allow_nan=False)
    # Written last and atomically, map images included: a command that fails leaves nothing behind (each file is
    # written to a temporary name and renamed only when every file has been written).
    try:
        with contextlib.ExitStack() as stack:
            a, b, z, c = (stack.enter_context(atomic_output(out_dir / f))
                          for f in ("release.csv", "release.parquet", "zones.geojson", "summary.json"))
            tmp_maps = [(p, write, stack.enter_context(atomic_output(p))) for p, write in maps]
            out_table.to_csv(a, index=False)
            out_table.to_parquet(b, index=False)
            write_zone_geometry(od.grid, z, od.cells)
            c.write_text(text, encoding="utf-8")
            for p, write, tmp in tmp_maps:
                write(p, tmp)
    except OSError as exc:
        raise ParameterError(f"--out {out_dir}: cannot write ({exc}).") from None
    if args.json:
        print_json(summary)
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
        print(f"wrote {out_dir / 'release.csv'}, {out_dir / 'release.parquet'}, {out_dir / 'summary.json'}, "
              f"{out_dir / 'zones.geojson'}")
    return 0


def jsonable(o: Any) -> Any:
    """Plain JSON types; NaN and infinities (undefined figures, e.g. nothing published) become null."""
    import math

    import numpy as np

    if isinstance(o, dict):
        return {str(k): jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [jsonable(v) for v in o]
    if isinstance(o, np.ndarray):
        return [jsonable(v) for v in o.tolist()]
    if isinstance(o, (bool, np.bool_)):
        return bool(o)
    if isinstance(o, (int, np.integer)):
        return int(o)
    if isinstance(o, (float, np.floating)):
        f = float(o)
        return f if math.isfinite(f) else None
    if o is None or isinstance(o, str):
        return o
    if hasattr(o, "isoformat"):
        return o.isoformat()
    if hasattr(o, "value") and isinstance(o.value, str):  # str enums
        return o.value
    return str(o)


def _map_images(s: dict, od, table, cfg, week) -> list[tuple[Path, Any]]:
    """``--map FILE[,FILE]``: the week's published flows as an image (odcore.report.figures.flow_map_figure).

    Checks the flags and draws the figure; returns ``(path, write)`` pairs, where ``write(path, tmp)`` renders the
    image into the temporary file ``tmp`` (the caller renames it to ``path`` once every output is written)."""
    import numpy as np
    import pandas as pd

    from odcore.privacy.release import cell_release_probability
    from odcore.report import figures

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
    cent = od.centroids()
    cp = cell_release_probability(t)
    polys = od.grid.polygons(cp["cell"].to_numpy())
    cells = pd.DataFrame({"cell": cp["cell"].to_numpy(),
                          "polygon": [np.asarray(g.exterior.coords)[:-1].tolist() for g in polys.geometry],
                          "value": cp["release_prob_any"].to_numpy()})
    # what the figure draws: the published flows, nearby zones merged when the largest are too short to read at
    # the image's scale (odcore.report.flows.flow_picture, as the dashboard's map)
    from odcore.report import flows as fl

    corners = np.concatenate([np.asarray(q, float) for q in cells["polygon"]]) if len(cells) else np.zeros((1, 2))
    span_km = max(float(np.ptp(corners[:, 0])) * figures.km_per_deg_lon(float(corners[:, 1].mean())),
                  float(np.ptp(corners[:, 1])) * figures.KM_PER_DEG_LAT, 0.5)
    map_px = max(min(w_in * figures.CSS_PX_PER_INCH - figures.LEGEND_PX, h_in * figures.CSS_PX_PER_INCH - 60), 100)
    pic = fl.flow_picture(t, cent, value="noisy_count", keep=t["released"].to_numpy(dtype=bool),
                          top_n=int(s["map_top"]), km_per_px=span_km / map_px)
    pl, fw = pic.places, pic.flows
    flows = pd.DataFrame({"o_lon": pl["lon"].to_numpy()[fw["o"]], "o_lat": pl["lat"].to_numpy()[fw["o"]],
                          "d_lon": pl["lon"].to_numpy()[fw["d"]], "d_lat": pl["lat"].to_numpy()[fw["d"]],
                          "count": fw["count"].to_numpy(dtype=float)})
    places = pl.loc[pl["total"].to_numpy() > 0, ["lon", "lat", "total"]]
    start = od.week_starts[wk] if wk < len(od.week_starts) else wk
    note = None if len(flows) else (f"Nothing published: the busiest pair has {int(t['true_count'].max()) if len(t) else 0}"
                                    f" people, threshold {cfg.threshold:g}")
    fig = figures.flow_map_figure(
        cells, flows, title=f"Published OD flows, week {wk} (from {start})", count_label="noisy count",
        subtitle=f"ε = {cfg.epsilon:g}, threshold {cfg.threshold:g}, noise scale {cfg.scale:.3g}, "
                 f"{_zones_words(od.grid)}, {len(flows):,} largest flow{'' if len(flows) == 1 else 's'}", empty_note=note, locations=places,
        class_edges=pic.class_edges if len(flows) else None, level=pic.level_words(short=True))
    figures.require_browser()   # before anything is written: say at once that the image cannot be drawn

    def write(p: Path, tmp: Path) -> None:
        try:
            figures.write_image(fig, tmp, width_in=w_in, height_in=h_in, dpi=int(s["map_dpi"]))
        except ValueError as exc:
            raise ParameterError(f"--map {p}: {exc}") from None
        except OSError as exc:
            raise ParameterError(f"--map {p}: cannot write ({exc}).") from None

    return [(p, write) for p in paths]


def _zones_words(grid) -> str:
    km2 = getattr(grid, "cell_km2", None)
    return f"{km2:g} km² cells" if km2 else f"{getattr(grid, 'n_cells', '?')} zones"
