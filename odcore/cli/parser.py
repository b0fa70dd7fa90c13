"""The command line's parser: every command's name, arguments and the module that runs it, in one light module.

Building the parser imports nothing but the standard library, :mod:`odcore.constants` and :mod:`odcore.paths` (no
numpy); :func:`odcore.cli.main` imports the module named in :data:`COMMANDS` only when its command runs, and that
module imports its engine at its top.

>>> p = build_parser()
>>> a = p.parse_args(["trips", "--input", "x.csv", "--cell-km2", "2"])
>>> (a._command, a.format, a.cell_km2, a.tz)
('trips', 'auto', 2.0, 'auto')
>>> COMMANDS["attack-curve"]
('odcore.cli.curve', 'run_curve')
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from odcore import __version__
from odcore.constants import (
    DEFAULT_COMPARE_SPECS,
    DEFAULT_DISTRICTS,
    DEFAULT_DISTRICTS_SEED,
    DEFAULT_SAMPLE_SEED,
    SIZE_PRESET_NAMES,
)
from odcore.paths import SAMPLE_DATA_DIR

COMMANDS: dict[str, tuple[str, str]] = {
    "info": ("odcore.cli.info", "run"),
    "synth": ("odcore.cli.synth", "run_synth"),
    "trips": ("odcore.cli.data", "run_trips"),
    "budget": ("odcore.cli.release", "run_budget"),
    "release": ("odcore.cli.release", "run_release"),
    "knock": ("odcore.cli.knock", "run_knock"),
    "defences": ("odcore.cli.knock", "run_defences"),
    "recover": ("odcore.cli.recover", "run_recover"),
    "attack-learned": ("odcore.cli.recover", "run_learned"),
    "attack-curve": ("odcore.cli.curve", "run_curve"),
    "user-risk": ("odcore.cli.attack", "run_user_risk"),
    "audit": ("odcore.cli.audit", "run_audit"),
    "selection": ("odcore.cli.audit", "run_selection"),
    "districts": ("odcore.cli.zones", "run_districts"),
    "zones-compare": ("odcore.cli.zones", "run_zones_compare"),
    "design": ("odcore.cli.design", "run"),
    "figures": ("odcore.cli.figures", "run_figures"),
    "facts": ("odcore.cli.facts", "run"),
    "report": ("odcore.cli.report", "run"),
}
"""Command name -> (module, function): ``function(args)`` runs the command and returns its exit code."""

DEFAULT_INPUT = SAMPLE_DATA_DIR / "synthetic_city.parquet"

# The defaults of odcore.data.synth.SynthConfig that the synth command shows, written out so that parsing arguments
# does not import the generator (and pandas); tests/odcore/cli/test_cli_startup.py checks that they agree.
SYNTH_DEFAULTS = {"users": 25_000, "weeks": 1, "center": (33.7490, -84.3880), "extent_km": 20.0,
                  "start": "2024-01-08", "tz": "UTC"}
DEFENCES = "laplace,threshold,bounding,lpa"
DEFAULT_KNOWN_TRIPS = 32
FIGURES = ("fig1_per_count", "fig1_per_person", "budget_weeks", "release_probability", "flow_map",
           "zone_comparison", "knock_auc")
FORMATS = ("svg", "pdf", "png")

# --config keys a command accepts and ignores (besides odcore.cli.ALWAYS_IGNORED)
_IGNORED_BUDGET = frozenset({"dataset", "week", "cell_km2", "zones", "seed"})
_IGNORED_RELEASE = frozenset({"dataset"})
_DESIGNER_CHOOSES = frozenset({"dataset", "epsilon", "threshold", "mode"})   # dashboard keys the designer chooses

KNOCK_DESCRIPTION = """``python -m odcore knock`` and ``python -m odcore defences`` (Pyrgelis et al. 2018, Knock Knock).

``knock`` plays the membership-inference game for sampled targets and prints per-target AUCs, mean AUC and
privacy loss per classifier (optionally under a DP defence: AUC on raw and noisy releases, privacy gain).
``defences`` prints the MRE table of the DP mechanisms (the paper's Tables II/III).
"""

RECOVER_DESCRIPTION = """``python -m odcore recover``: rebuild whole trajectories from counts per cell per slot (Xu et al. 2017,
"Trajectory Recovery From Ash") and score them against the true traces, with and without the lab's defences.

Input: traces (``--input``, any format the lab reads; the counts are built from them) or the plain files
``--counts counts.csv --cells cells.csv`` (format in docs/recover.md), with ``--truth truth_do_not_share.csv`` to
score. Outputs: ``--write-counts DIR`` (counts.csv, cells.csv, truth_do_not_share.csv), ``--out recovered.csv``
(``trajectory,slot,cell``), ``--epsilon``/``--defences`` for accuracy against ε.
"""

FIGURES_DESCRIPTION = """``python -m odcore figures --out DIR [--preset ...]``: the paper set, each figure with the JSON that redraws it.

Figures (names for ``--only``): Houssiau et al.'s Fig. 1 per count and per person and week (``fig1_per_count``,
``fig1_per_person``), a person's ε over weeks (``budget_weeks``), the release probability (``release_probability``),
the week's flow map (``flow_map``), the zone comparison (``zone_comparison``) and a Knock Knock AUC chart
(``knock_auc``). Each is written as ``NAME.svg`` (fonts embedded), ``NAME.pdf`` and ``NAME.png`` at a size preset
(``single-column`` 3.5 in, ``double-column`` 7 in, ``slide`` 16:9) or ``--size WxH`` and ``--dpi``, with
``NAME.csv`` (the numbers drawn) and ``NAME.json``: ``python -m odcore figures --config NAME.json`` draws that
figure again. Every file is written at the end, all or nothing.
"""


TYPICAL = "typical"
"""``--trips typical``: the budget figure's person is the typical person of the data's week (the facts layer)."""


def trips_value(text: str) -> int | str:
    """``--trips``: a whole number of unique trips (at least 1) or :data:`TYPICAL`."""
    if str(text).strip().lower() == TYPICAL:
        return TYPICAL
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1 or '{TYPICAL}', got {text!r}")
    return n


def add_loader_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--input --format --tz --time-offset --poi --bbox --start --end`` and the column mapping
    (``--user-col --time-col --lat-col --lon-col --loc-col --time-unit``) to ``parser``."""
    g = parser.add_argument_group("input traces")
    g.add_argument("--input", default=str(DEFAULT_INPUT),
                   help="trace file, folder or zip (default: the bundled synthetic city %(default)s)")
    g.add_argument("--format", default="auto", choices=["auto", "csv", "parquet", "cabspotting", "checkins"],
                   help="input format (default: detect from names / first line)")
    g.add_argument("--tz", default="auto",
                   help="IANA time zone for naive times, hours and Monday-00:00 week starts; 'auto' = the "
                        "format's documented zone (Cabspotting: America/Los_Angeles), else the zone a zone-aware "
                        "time column states, else the zone at the centre of the kept points (offline lookup) "
                        "(default: %(default)s)")
    g.add_argument("--time-offset", type=float, default=0.0, metavar="SECONDS",
                   help="seconds added to every time (the shared check-in sets are 8 h early: 28800)")
    g.add_argument("--poi", default=None, metavar="PATH",
                   help="check-ins: POI coordinates file 'poi lat lon' (found automatically in a folder/zip)")
    g.add_argument("--bbox", default="auto", metavar="S,W,N,E",
                   help="keep points inside south,west,north,east; 'auto' = robust percentile box that clips "
                        "far GPS glitches; 'none' keeps all (default: %(default)s)")
    g.add_argument("--region", default="auto", metavar="auto|all|N|S,W,N,E",
                   help="when the data spans more than a metropolitan area: 'auto' keeps the densest region of "
                        "users' homes, N the N-th densest, 'all' everything (a continent-wide grid), or a box "
                        "(default: %(default)s)")
    g.add_argument("--start", default=None, help="keep times >= this date/time (naive = in --tz)")
    g.add_argument("--end", default=None, help="keep times < this date/time (naive = in --tz)")
    m = parser.add_argument_group("column mapping (generic CSV / Parquet; default: detect common names)")
    for role, what in (("user", "user id"), ("time", "timestamp"), ("lat", "latitude"), ("lon", "longitude"),
                       ("loc", "optional precomputed location id")):
        m.add_argument(f"--{role}-col", default=None, metavar="NAME", help=f"column holding the {what}")
    m.add_argument("--time-unit", default=None, choices=["auto", "iso", "s", "ms"],
                   help="times as ISO text, Unix seconds or milliseconds (default: auto)")


def add_grid_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--zones`` (square grid, H3 hexagons or a zone file) and ``--cell-km2`` (shorthand for ``square:KM2``,
    default 1.3 km² as in Bassolas et al.'s reply)."""
    g = parser.add_argument_group("zones (origins and destinations)")
    g.add_argument("--zones", default=None, metavar="SPEC",
                   help="square:KM2 (square cells), h3:RES (H3 hexagons, res 8 ≈ 0.74 km²) or a zone file "
                        "(.geojson, .gpkg, zipped Shapefile; any CRS; a 'name' column labels zones); points "
                        "outside every zone are dropped and counted (default: square:--cell-km2)")
    g.add_argument("--cell-km2", type=float, default=1.3,
                   help="square grid cell area in km², same as --zones square:KM2 (default %(default)s, "
                        "Bassolas et al. 2022 reply)")
    e = parser.add_argument_group("OD engine (identical results; odcore.od.engines)")
    e.add_argument("--engine", default="memory", choices=["memory", "duckdb", "spark"],
                   help="memory: numpy in this process; duckdb: embedded, out of core (streams Parquet/CSV with "
                        "bounded memory); spark: PySpark, local mode or spark-submit (default %(default)s)")
    e.add_argument("--memory-limit", default="3GB", metavar="SIZE",
                   help="duckdb: memory limit before spilling to disk (default %(default)s)")
    e.add_argument("--spark-master", default="local[2]", metavar="URL",
                   help="spark: master when no session exists (default %(default)s; spark-submit sets its own)")


def add_release_args(group) -> None:
    """Add ``--epsilon --threshold --mode --max-pairs`` (the Laplace + threshold release) to a parser or group."""
    group.add_argument("--epsilon", type=float, default=0.66, help="Laplace epsilon (default %(default)s)")
    group.add_argument("--threshold", type=float, default=100,
                       help="publish iff noisy count >= this (default %(default)s)")
    group.add_argument("--mode", default="per_metric", choices=["per_metric", "user_level"],
                       help="per_metric: noise 1/eps (Bassolas); user_level: each user keeps --max-pairs unique "
                            "pairs per week (smallest keyed hash: the same pairs in every engine for a seed), noise "
                            "max_pairs/eps (default %(default)s)")
    group.add_argument("--max-pairs", type=int, default=None,
                       help="user-level contribution bound (needs --mode user_level)")


def _info(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="print the engine version, core count and bundled sample data")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def _data(sub: argparse._SubParsersAction) -> None:
    d = argparse.Namespace(**SYNTH_DEFAULTS)
    p = sub.add_parser("synth", help="generate a synthetic city's traces (Parquet or CSV)",
                       description="Generate a synthetic city (odcore.data.synth): homes, workplaces, commuting and "
                                   "exploration/preferential-return leisure trips, one location per user-hour.")
    p.add_argument("--users", type=int, default=d.users, help="number of users (default %(default)s)")
    p.add_argument("--weeks", type=int, default=d.weeks, help="number of weeks (default %(default)s)")
    p.add_argument("--seed", type=int, default=DEFAULT_SAMPLE_SEED, help="random seed (default %(default)s)")
    p.add_argument("--center", default=f"{d.center[0]},{d.center[1]}", metavar="LAT,LON",
                   help="city centre (default %(default)s, Atlanta)")
    p.add_argument("--extent-km", type=float, default=d.extent_km, help="city radius in km (default %(default)s)")
    p.add_argument("--start", default=d.start, help="first Monday, ISO date (default %(default)s)")
    p.add_argument("--tz", default=d.tz, help="local time zone of the daily schedule (default %(default)s)")
    p.add_argument("--out", required=True,
                   help="output file (.parquet or .csv[.gz]), or a folder (no suffix): Parquet files written in "
                        "chunks of users, for big cities (any size in the memory of one chunk)")
    p.add_argument("--chunk-users", type=int, default=200_000,
                   help="users per chunk when --out is a folder (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print a JSON summary")

    q = sub.add_parser("trips", help="traces -> hourly cells -> trips -> weekly unique OD counts (summary)",
                       description="Load traces, lay a square grid, keep the most used cell per user-hour, count "
                                   "trips to a distinct cell in the next hour and distinct users per week and "
                                   "cell pair (Houssiau et al. 2022, Methods; Bassolas et al. 2022).")
    add_loader_args(q)
    add_grid_args(q)
    q.add_argument("--threshold", type=int, default=100,
                   help="count pair-weeks with at least this many distinct users (default %(default)s)")
    q.add_argument("--counts-out", default=None, metavar="DIR|FILE",
                   help="DIR (no suffix): write an OD counts folder (Parquet partitioned by week, per-user-week "
                        "figures, zones, manifest.json) that every subcommand and the dashboard accept as --input; "
                        "FILE (.csv/.parquet): the weekly counts table (week, origin, origin_name, destination, "
                        "destination_name, count) and the used zones' geometry beside it (FILE's name + "
                        ".zones.geojson)")
    q.add_argument("--json", action="store_true", help="print JSON instead of text")


def _release(sub: argparse._SubParsersAction) -> None:
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
    pb.set_defaults(_config_ignored=_IGNORED_BUDGET)

    pr = sub.add_parser(
        "release", help="run the Laplace + threshold release on traces; write the OD table and a JSON summary",
        description="Load traces, build weekly unique OD pairs on a square grid, add Laplace noise to the "
                    "distinct-user counts and publish pairs whose noisy count is >= the threshold. Writes the "
                    "published pairs only (published.csv, published.parquet, zones.geojson, release.json, "
                    "guarantee_sheet.html) to --out; the analysis table with true counts only with --analysis-out.")
    add_loader_args(pr)
    add_grid_args(pr)
    g = pr.add_argument_group("release")
    add_release_args(g)
    g.add_argument("--week", type=int, default=None, help="release only this week number (default: every week)")
    g.add_argument("--seed", type=int, default=None, help="random seed (same seed, same output)")
    g.add_argument("--out", default=None,
                   help="folder for what may be shared (created; required): published.csv and .parquet (published "
                        "pairs only, noisy counts), zones.geojson, release.json (the record and the guarantee), "
                        "guarantee_sheet.html. Must be new, empty or an earlier --out of this command")
    g.add_argument("--analysis-out", default=None, metavar="DIR",
                   help="also write the analysis table (true counts, noise, unpublished pairs; DO NOT SHARE) and the "
                        "full summary to this separate folder")
    g.add_argument("--delta", type=float, default=1e-6,
                   help="the person's delta over --weeks weeks, every part included (default %(default)s)")
    g.add_argument("--weeks", type=int, default=52,
                   help="weekly releases the guarantee covers, as budget --weeks; user_level fits the threshold "
                        "over them (default %(default)s)")
    g.add_argument("--trips", type=int, default=70,
                   help="unique trips a week of the person the per-count guarantee describes, as budget --trips: the "
                        "publisher's assumption, stated on the public sheet and in release.json (the data's own "
                        "median is not published: it is not protected). Default %(default)s (Houssiau et al.)")
    m = pr.add_argument_group("flow map image")
    m.add_argument("--map", default=None, metavar="FILE[,FILE]",
                   help="also draw the published flows of the week (--week, default the first) as FILE.png, .svg or "
                        ".pdf, with legend, scale bar and title; several files separated by commas")
    m.add_argument("--map-top", type=int, default=0,
                   help="draw the N largest flows (default 0: as many as the OD release page draws, 'auto')")
    m.add_argument("--map-size", default="8x6", metavar="WxH",
                   help="image size in inches (default %(default)s)")
    m.add_argument("--map-dpi", type=int, default=300, help="PNG resolution (default %(default)s)")
    _common_flags(pr)
    pr.set_defaults(_config_ignored=_IGNORED_RELEASE)


def _common_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


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


def _knock(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("knock", help="Knock Knock membership inference on aggregate location time-series",
                       description=KNOCK_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
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

    q = sub.add_parser("defences", help="MRE of the DP defences on aggregate location time-series (Tables II/III)",
                       description=KNOCK_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
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


def _recover(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("recover", help="trajectory recovery from per-cell, per-slot counts (Xu et al. 2017), "
                                       "scored against the true traces, under the lab's defences",
                       description=RECOVER_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_loader_args(p)
    g = p.add_argument_group("cells and slots (from traces)")
    g.add_argument("--grid", default="auto", choices=["auto", "sfc", "bbox"],
                   help="cells: 'auto' = grid over the box of the central 98%% of points; 'sfc' = Knock Knock's "
                        "downtown San Francisco grid; 'bbox' = --grid-bbox (default %(default)s)")
    g.add_argument("--grid-bbox", default=None, metavar="S,W,N,E", help="grid box for --grid bbox")
    g.add_argument("--grid-shape", default="20x20", metavar="ROWSxCOLS", help="grid shape (default %(default)s)")
    g.add_argument("--slot-minutes", type=int, default=60, help="slot length, divides a day (default %(default)s)")
    g.add_argument("--days", type=int, default=None, help="keep the first DAYS whole days (default: all)")
    g.add_argument("--min-coverage", type=float, default=0.0,
                   help="keep people with a record in at least this share of slots (default %(default)s)")
    g.add_argument("--people", type=int, default=None,
                   help="draw this many people at random (seed --seed) to fit time (default: everyone)")
    f = p.add_argument_group("plain files")
    f.add_argument("--counts", default=None, metavar="counts.csv", help="read counts from this file, not traces")
    f.add_argument("--cells", default=None, metavar="cells.csv", help="cell centres for --counts")
    f.add_argument("--truth", default=None, metavar="truth.csv", help="true sequences to score --counts against")
    f.add_argument("--recovered", default=None, metavar="recovered.csv",
                   help="score this recovery (trajectory,slot,cell; e.g. another implementation's) instead of "
                        "running the attack on --counts")
    f.add_argument("--write-counts", default=None, metavar="DIR",
                   help="write counts.csv, cells.csv and truth_do_not_share.csv built from the traces")
    f.add_argument("--out", default=None, metavar="recovered.csv", help="write the recovered sequences")
    a = p.add_argument_group("attack and defences")
    a.add_argument("--night", default="0-6", metavar="H0-H1", help="night phase hours (default %(default)s)")
    a.add_argument("--no-link", action="store_true", help="skip the linking of days (phase 3)")
    a.add_argument("--epsilon", default=None, metavar="E1,E2,...",
                   help="run the defences at these epsilons (e.g. 0.1,1,10,100); default: no defence only")
    a.add_argument("--defences", default=DEFENCES,
                   help=f"subset of laplace,threshold,bounding,lpa,gsm,fpa,efpag (default {DEFENCES})")
    a.add_argument("--threshold", type=float, default=5.0, help="threshold defence: tau (default %(default)s)")
    a.add_argument("--max-slots", type=int, default=24,
                   help="bounding defence: slots kept per person (default %(default)s)")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--json", action="store_true", help="print JSON")

    q = sub.add_parser("attack-learned", help="learned membership attacks (two-threshold, one-threshold, Knock "
                                              "Knock's classifiers) beside the exact p_k for people of a week",
                       description="For people of the week of the OD release (their k unique pairs), the exact "
                                   "success p_k of the optimal attacker and the test success of attackers that learn "
                                   "their rule from simulated releases (odcore.recover.learned); the gap in points.")
    add_loader_args(q)
    add_grid_args(q)
    g = q.add_argument_group("release and attack")
    add_release_args(g)
    g.add_argument("--week", type=int, default=0, help="week number (default %(default)s)")
    g.add_argument("--people", type=int, default=20, help="people drawn from the week (default %(default)s)")
    g.add_argument("--n-train", type=int, default=2000, help="simulated releases to learn from (default 2000)")
    g.add_argument("--n-test", type=int, default=4000, help="simulated releases to score on (default 4000)")
    g.add_argument("--classifiers", default="lr,knn,rf,mlp", help="Knock Knock's classifiers (default all)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--json", action="store_true", help="print JSON")


def _attack(sub: argparse._SubParsersAction) -> None:
    pc = sub.add_parser(
        "attack-curve", help="exact success p_k of the membership attack for k = 0..k_max (+ Monte Carlo)",
        description="Exact success of the optimal membership attack of Houssiau et al. 2022 (perfect knowledge of "
                    "everyone else, equal priors) on a user with k unique weekly trips: 1/2 + 1/2 TV between "
                    "Lap(0,1/eps)^k and Lap(1,1/eps)^k, with the bound e^eps/(1+e^eps) of the per-metric guarantee.")
    pc.add_argument("--epsilon", type=float, default=0.66, help="Laplace epsilon (default %(default)s)")
    pc.add_argument("--k-max", type=int, default=70, help="largest k (default %(default)s, as in the paper)")
    pc.add_argument("--monte-carlo", type=int, default=None, metavar="N",
                    help="also run the paper's Monte Carlo with N repetitions per k (the paper: 10000)")
    pc.add_argument("--seed", type=int, default=None, help="random seed of the Monte Carlo")
    pc.add_argument("--prior", type=float, default=0.5,
                    help="prior probability that the user is in (default %(default)s); != 0.5 adds the "
                         "Bayes-optimal success and posterior bound for that prior")
    pc.add_argument("--tpr", action="store_true",
                    help="also the optimal attacker's TPR at FPR 1%% and 0.1%% for every k (exact ROC points)")
    pc.add_argument("--mode", default="per_metric", choices=["per_metric", "user_level"],
                    help="user_level adds the success against the per-person (bounded) release, noise "
                         "max_pairs/eps on min(k, max_pairs) counts (default %(default)s)")
    pc.add_argument("--max-pairs", type=int, default=None, help="contribution bound of --mode user_level")
    pc.add_argument("--json", action="store_true", help="print JSON instead of text")

    pu = sub.add_parser(
        "user-risk", help="attack success for every user of one week of a thresholded release",
        description="Per user of one week: number of unique pairs k, informative pairs, exact success of the "
                    "optimal membership attack against the Laplace + threshold release (a pair is observed as "
                    "'suppressed' or as its noisy count), the effective k (k of the plain curve with the same "
                    "success), and the distribution over users (share facing > 90%% success).")
    add_loader_args(pu)
    add_grid_args(pu)
    g = pu.add_argument_group("release and attack")
    add_release_args(g)
    g.add_argument("--week", type=int, default=0, help="week number (default %(default)s)")
    g.add_argument("--seed", type=int, default=None, help="seed of the user-level pair sampling")
    g.add_argument("--resolution", type=int, default=64,
                   help="loss grid points per epsilon (default %(default)s, with Richardson extrapolation: error ~1e-6)")
    g.add_argument("--fast", action="store_true",
                   help="dashboard mode: resolution 16 without extrapolation (error <= ~5e-5, upward)")
    g.add_argument("--user", default=None,
                   help="detail for one user: exact success with bounds and the ROC (TPR at FPR 1%%, 0.1%%)")
    g.add_argument("--prior", type=float, default=None,
                   help="with --user: also the Bayes-optimal success when the user is in with this prior")
    g.add_argument("--json", action="store_true", help="print JSON instead of text")


def _audit(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "audit", help="empirical lower bound on epsilon from canaries in the release, beside the theory",
        description="Insert canary people (each included by a fair coin) into one week, release it once with the "
                    "Laplace + threshold mechanism, guess each canary's membership from the published table with "
                    "the likelihood-ratio score of the Attack page, and turn the guesses into a lower bound on "
                    "epsilon at the stated confidence (Steinke, Nasr and Jagielski 2023). Per count a canary has "
                    "one pair; per person it has the week's median number of unique pairs.")
    add_loader_args(p)
    add_grid_args(p)
    g = p.add_argument_group("audit")
    g.add_argument("--epsilon", type=float, default=0.66, help="Laplace epsilon per count (default %(default)s)")
    g.add_argument("--threshold", type=float, default=100, help="publication threshold (default %(default)s)")
    g.add_argument("--unit", default="both", choices=["count", "person", "both"],
                   help="what a canary is: one count, one person with the typical unique pairs, or both "
                        "(default %(default)s)")
    g.add_argument("--canaries", type=int, default=1000, help="canaries per run (default %(default)s)")
    g.add_argument("--trips", type=int, default=None,
                   help="unique pairs of a canary person (default: the week's median)")
    g.add_argument("--placement", default="visible", choices=["visible", "typical"],
                   help="visible: canary pairs published (a known background of others on fresh pairs); "
                        "typical: pairs drawn as a random person's, mostly suppressed (default %(default)s)")
    g.add_argument("--guess-share", type=float, default=0.5,
                   help="share of canaries guessed on, the most confident (default %(default)s)")
    g.add_argument("--confidence", type=float, default=0.95, help="confidence of the bound (default %(default)s)")
    g.add_argument("--delta", type=float, default=1e-6,
                   help="delta of the theoretical per-person epsilon and of the many-run bound (default %(default)s)")
    g.add_argument("--no-noise", action="store_true",
                   help="audit a release without noise (the check that the audit finds a leak)")
    g.add_argument("--many-runs", type=int, default=None, metavar="R",
                   help="also the many-run audit of one target with R releases of its pairs")
    g.add_argument("--week", type=int, default=None, help="week audited (default: the one with most pairs)")
    g.add_argument("--seed", type=int, default=None, help="random seed (canaries, coins, noise)")
    g.add_argument("--json", action="store_true", help="print JSON instead of text")

    s = sub.add_parser(
        "selection", help="pairs and user-trips each partition-selection strategy keeps, at equal (eps, delta)",
        description="One week, per person and week (epsilon, delta) and at most --max-pairs pairs a person: the "
                    "lab's Laplace-then-threshold release (one noisy count), its Gaussian variant, the truncated "
                    "geometric and Laplace thresholding selections with a separate count, and PipelineDP on the "
                    "same pairs (when installed): pairs and user-trips kept, error split into bounding and noise.")
    add_loader_args(s)
    add_grid_args(s)
    g = s.add_argument_group("selection")
    g.add_argument("--epsilon", type=float, default=1.0, help="epsilon per person and week (default %(default)s)")
    g.add_argument("--delta", type=float, default=1e-6, help="delta per person and week (default %(default)s)")
    g.add_argument("--max-pairs", default="1,5,10,20", help="pairs a person keeps, comma-separated list "
                   "(default %(default)s)")
    g.add_argument("--no-pipeline-dp", action="store_true", help="leave PipelineDP out (it takes ~30 s a run)")
    g.add_argument("--week", type=int, default=None, help="week (default: the one with most pairs)")
    g.add_argument("--seed", type=int, default=None, help="random seed of the lab's bounding and noise")
    g.add_argument("--json", action="store_true", help="print JSON instead of text")
    g.add_argument("--markdown", action="store_true", help="print one Markdown table (for docs) instead of text")


def _zones(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("districts", help="make Voronoi districts of a city's traces (a small zone file)",
                       description="Voronoi districts of the traces' points (seeds drawn among distinct points, "
                                   "so districts are small where people are dense), clipped to the circle that "
                                   "holds 99.5%% of the points; written as GeoJSON with 'district_id' and 'name'.")
    add_loader_args(p)
    p.add_argument("--n", type=int, default=DEFAULT_DISTRICTS, help="number of districts (default %(default)s)")
    p.add_argument("--seed", type=int, default=DEFAULT_DISTRICTS_SEED, help="random seed (default %(default)s)")
    p.add_argument("--out", required=True, help="output .geojson")
    p.add_argument("--json", action="store_true", help="print a JSON summary")

    default = [*DEFAULT_COMPARE_SPECS, str(SAMPLE_DATA_DIR / "districts.geojson")]
    c = sub.add_parser("zones-compare", help="compare zone systems: pairs and user-trips published, attack success",
                       description="On the same traces, epsilon and threshold: for each zone system, the weekly "
                                   "unique OD pairs, what the Laplace + threshold release publishes (pairs and "
                                   "user-trips) and the per-user membership attack's success (Houssiau et al. "
                                   "2022) over the week's users.")
    add_loader_args(c)
    c.add_argument("--zones", nargs="+", default=default, metavar="SPEC",
                   help="zone systems: square:KM2, h3:RES or zone files (default: " + " ".join(
                       DEFAULT_COMPARE_SPECS) + " and the bundled districts)")
    g = c.add_argument_group("release")
    g.add_argument("--epsilon", type=float, default=0.66, help="Laplace epsilon per count (default %(default)s)")
    g.add_argument("--threshold", type=float, default=100,
                   help="publish iff noisy count >= this (default %(default)s)")
    g.add_argument("--week", type=int, default=None,
                   help="week released and attacked (default: the week with the most user-pairs)")
    g.add_argument("--seed", type=int, default=1, help="random seed of the noise (default %(default)s)")
    c.add_argument("--out", default=None, metavar="FILE.csv", help="also write the table as CSV")
    c.add_argument("--json", action="store_true", help="print JSON records instead of a table")


def _design(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "design", help="design a per-person release (max_pairs, noise scale, threshold) that meets a privacy goal",
        description="Search contribution bound, noise scale and threshold for a release whose per-person guarantee "
                    "meets the goal, measure what it keeps on one week of the data, and compare with Google's "
                    "per-metric setting. The budget agrees with `budget --mode user_level` on the settings found.")
    add_loader_args(p)
    add_grid_args(p)
    g = p.add_argument_group("goal")
    g.add_argument("--goal", default="week", choices=["week", "total", "attack", "tpr", "advantage", "posterior"],
                   help="week: epsilon per person and week; total: over --weeks; attack: attacker's success; tpr: "
                        "attacker's true-positive rate at --fpr; advantage: TPR - FPR; posterior: attacker's belief "
                        "from --prior (default %(default)s)")
    g.add_argument("--target-epsilon", type=float, default=1.0,
                   help="largest epsilon per person (goals week/total; default %(default)s)")
    g.add_argument("--target-delta", type=float, default=1e-6,
                   help="largest delta, partition selection included (default %(default)s)")
    g.add_argument("--weeks", type=int, default=52, help="weekly releases the total covers (default %(default)s)")
    g.add_argument("--known-trips", type=int, default=None,
                   help=f"k: trips the attacker knows (goal attack; default {DEFAULT_KNOWN_TRIPS}, said in the output)")
    g.add_argument("--success", type=float, default=0.6,
                   help="p: largest success of that attacker, in (0.5, 1) (goal attack; default %(default)s)")
    g.add_argument("--tpr", type=float, default=None, help="goal tpr: largest TPR at --fpr, in (fpr, 1)")
    g.add_argument("--advantage", type=float, default=None, help="goal advantage: largest TPR - FPR, in (0, 1)")
    g.add_argument("--posterior", type=float, default=None,
                   help="goal posterior: largest belief that the person is in the data, in (prior, 1)")
    g.add_argument("--fpr", type=float, default=0.01,
                   help="false-positive rate the TPR is read at (default %(default)s)")
    g.add_argument("--prior", type=float, default=0.5,
                   help="attacker's prior that the person is in the data (default %(default)s)")
    g.add_argument("--attacker", default="known", choices=["known", "full"],
                   help="risk goals: known = knows --known-trips of the person's trips and everyone else's data; "
                        "full = knows the person's whole week too (default %(default)s)")
    g.add_argument("--max-pairs", type=int, default=None,
                   help="fix the contribution bound; default: the data-independent default (10)")
    g.add_argument("--tune", action="store_true",
                   help="choose max_pairs on the week's data: of the candidates whose expected error is at most "
                        "10 %%, the one publishing most user-trips (that choice uses the data)")
    g.add_argument("--week", type=int, default=None, help="week whose data measures utility (default: the first)")
    g.add_argument("--seed", type=int, default=0, help="seed of the bounding and noise (default %(default)s)")
    g.add_argument("--sheet", default=None, metavar="FILE.html", help="also write the designer's guarantee sheet (HTML; do not share: it holds figures of the true data)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(_config_ignored=_DESIGNER_CHOOSES)


def _figures(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("figures", help="write the paper set of figures (SVG/PDF/PNG at a size preset) with configs",
                       description=FIGURES_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created)")
    p.add_argument("--preset", default="single-column", choices=list(SIZE_PRESET_NAMES),
                   help="figure size: single-column 3.5 in, double-column 7 in, slide 16:9 (default %(default)s)")
    p.add_argument("--size", default=None, metavar="WxH", help="width x height in inches instead of the preset's")
    p.add_argument("--dpi", type=int, default=None, help="PNG resolution (default: the preset's)")
    p.add_argument("--formats", default=",".join(FORMATS), help="comma-separated among svg,pdf,png (default all)")
    p.add_argument("--only", default=",".join(FIGURES), metavar="NAME[,NAME]",
                   help="figures to draw (default all: " + ", ".join(FIGURES) + ")")
    g = p.add_argument_group("settings drawn")
    g.add_argument("--epsilon", type=float, default=0.66, help="ε (default %(default)s, Bassolas et al.)")
    g.add_argument("--mode", default="per_metric", choices=["per_metric", "user_level"],
                   help="unit of the budget and release figures: per count or per person and week "
                        "(Fig. 1 is drawn in both) (default %(default)s)")
    g.add_argument("--max-pairs", type=int, default=10, help="pairs kept per person and week (default %(default)s)")
    g.add_argument("--threshold", type=float, default=100, help="publish iff noisy count >= this (default 100)")
    g.add_argument("--trips", type=trips_value, default=21,
                   help="unique trips a week of the person of the budget figure: a number (default %(default)s, the "
                        "typical person of the bundled city, as `python -m odcore facts` gives it) or 'typical': the "
                        "typical person of the data's week, from the facts layer (the figure is then one drawn from "
                        "the data: DO_NOT_SHARE_budget_weeks)")
    g.add_argument("--weeks", type=int, default=52, help="weeks released in the budget figure (default 52)")
    g.add_argument("--week", type=int, default=None, help="week of the release and map (default: the first)")
    g.add_argument("--seed", type=int, default=None,
                   help="random seed of the noise and the experiments (default: a fresh one; a seed anyone knows "
                        "lets them take the noise off the map's published counts, so it is written only in the "
                        "DO_NOT_SHARE figures' configs)")
    g.add_argument("--map-top", type=int, default=0,
                   help="flows drawn on the map (default 0: as many as the OD release page draws, 'auto')")
    g.add_argument("--compare-zones", default="square:1.3,h3:8,square:5",
                   help="zone systems compared (default %(default)s)")
    g.add_argument("--knock-targets", type=int, default=3, help="Knock Knock targets (default %(default)s)")
    g.add_argument("--knock-classifiers", default="lr,knn,rf", help="Knock Knock classifiers (default %(default)s)")
    add_loader_args(p)
    add_grid_args(p)


def _facts(sub: argparse._SubParsersAction) -> None:
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


def _report(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report", help="design a per-person release of one week and write its report (shareable + do-not-share HTML)",
        description="Choose per-person settings with the release designer, release one week with them and write "
                    "report.html (may be shared: the published map and table, the guarantee in both units, the "
                    "verdict on the guarantee, the attack summary) and DO_NOT_SHARE_report.html (adds the release "
                    "against the truth, the designer's full verdict and the audit) to --out.")
    add_loader_args(p)
    add_grid_args(p)
    g = p.add_argument_group("report")
    g.add_argument("--target-epsilon", type=float, default=1.0,
                   help="largest epsilon per person and week the designer may use (default %(default)s)")
    g.add_argument("--target-delta", type=float, default=1e-6,
                   help="largest delta per person over --weeks, threshold part included (default %(default)s)")
    g.add_argument("--weeks", type=int, default=52, help="weekly releases the guarantee covers (default %(default)s)")
    g.add_argument("--max-pairs", type=int, default=None,
                   help="fix the contribution bound (default: the designer's data-independent default)")
    g.add_argument("--week", type=int, default=None, help="week to release (default: the first with trips)")
    g.add_argument("--seed", type=int, default=0, help="seed of the bounding, noise and audit (default %(default)s)")
    g.add_argument("--title", default="Weekly origin–destination counts", help="the release's name in the reports")
    g.add_argument("--no-map", action="store_true", help="leave the map out (drawing it needs Chrome or Chromium)")
    g.add_argument("--no-audit", action="store_true", help="leave the audit out of the do-not-share report")
    g.add_argument("--out", default=None, help="folder for the two HTML files (created; required). Must be new, "
                                               "empty or an earlier --out of this command")
    p.add_argument("--json", action="store_true", help="print a JSON summary instead of text")
    p.set_defaults(_config_ignored=_DESIGNER_CHOOSES)


def prog_name() -> str:
    """``odlab`` when run as the installed console command, else ``python -m odcore``."""
    return "odlab" if Path(sys.argv[0]).name == "odlab" else "python -m odcore"


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command in :data:`COMMANDS`; a parsed command's namespace holds ``_command`` (its name)
    and ``_parser`` (its subparser)."""
    parser = argparse.ArgumentParser(
        prog=prog_name(),
        description="OD Privacy Lab engine: weekly origin-destination releases, their differential-privacy "
                    "budget and membership attacks on them.",
    )
    parser.add_argument("--version", action="version", version=f"odcore {__version__}")
    sub = parser.add_subparsers(title="subcommands", metavar="SUBCOMMAND")
    for family in (_info, _data, _release, _knock, _recover, _attack, _audit, _zones, _design, _figures, _facts,
                   _report):
        family(sub)
    assert set(sub.choices) == set(COMMANDS), sorted(set(sub.choices) ^ set(COMMANDS))
    for command, p in sub.choices.items():
        if not any("--config" in a.option_strings for a in p._actions):
            p.add_argument("--config", default=None, metavar="FILE.json",
                           help="JSON object of settings; keys = flag names in snake_case (explicit flags win)")
        p.set_defaults(_parser=p, _command=command)
    return parser
