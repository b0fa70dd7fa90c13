"""The Release designer's cached computations: the week's pairs indexed for the search, the design report and its
frontier (as a plotly figure for the files, as the live component draws it)."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from odapp.data.cache import week_pairs_prepared
from odapp.shared.caching import cache_data, cache_resource
from odapp.shared.styling import styled
from odapp.shared.words import pct, unit_words
from odcore.privacy.design import WeekIndex
from odcore.privacy.design import design_report as _design_report
from odcore.report.facts import week_trips
from odcore.report.figures import PALETTE, legend_at, readable_log_ticks
from odcore.report.plain_json import jsonable


@cache_resource(max_entries=8, show_spinner="Indexing the week's pairs for the designer…")
def design_week(dataset_id: str, od_config, week: int, _od):
    """:class:`odcore.privacy.design.WeekIndex` of one week (seed-independent, read-only): a new seed only re-ranks it."""
    return WeekIndex(week_pairs_prepared(dataset_id, od_config, week, _od=_od))


@cache_data(max_entries=16, show_spinner="Designing the release (searching max pairs, noise and threshold)…")
def design_report(dataset_id: str, od_config, week: int, goal, max_pairs: int | None, seed: int, _od,
                  tune: bool = False) -> dict:
    """:func:`odcore.privacy.design.design_report` on one week of the data (with the frontier), JSON-able."""
    trips = week_trips(_od.user_week, week)   # the week's people: those with a trip (odcore.report.facts)
    return jsonable(_design_report(goal, design_week(dataset_id, od_config, week, _od=_od), trips, week=week,
                                    max_pairs=max_pairs, tune=tune, rng=seed, with_frontier=True))


@cache_resource(max_entries=16, show_spinner=False)
def frontier_figure(report_key: tuple, projector_on: bool, _rep: dict):
    """The Release designer's frontier chart of one report (``report_key``: the arguments of
    ``cache.design_report``), built once: a sidebar control the report does not depend on (ε, threshold, unit)
    reruns the page without rebuilding it. Read-only once built. Returns ``(figure, frontier DataFrame)``. (Here, not
    in the page script: Streamlit's cache machinery was seen holding the function it wraps, and with it the page's
    namespace.)"""
    g, d = _rep["google"], _rep["goal"]["delta"]
    front = pd.DataFrame(_rep["frontier"])
    # the traces as plain dicts, checked once by the figure (add_scatter checks each twice: ~half the build)
    traces = []
    for m, grp in front.groupby("max_pairs"):
        useful = grp["useful"] if "useful" in grp else pd.Series(True, index=grp.index)
        tr = {"type": "scatter", "x": grp["epsilon_user_week"], "y": grp["trips_published_frac"],
              "mode": "lines+markers", "name": f"max pairs {m} (threshold fitted, δ ≤ {d:.0e})",
              "marker": {"symbol": ["circle" if u else "circle-open" for u in useful], "size": 8}}
        if "relative_error" in grp:
            tr["customdata"] = grp[["relative_error"]].to_numpy()
            tr["hovertemplate"] = ("ε %{x:.3g}: %{y:.1%} of user-trips, expected error %{customdata[0]:.1%}"
                                   "<extra></extra>")
        traces.append(tr)
    # Google's two points named in the legend (text beside them crossed the curves), one marker each
    for who, key, trips, symbol in (("typical person", "epsilon_user_week_typical", g["typical_trips"], "x"),
                                    ("busiest person", "epsilon_user_week_max", g["max_trips"], "diamond")):
        traces.append({"type": "scatter", "x": [g[key]], "y": [g["trips_published_frac"]], "mode": "markers",
                       "marker": {"size": 12, "symbol": symbol, "color": "#66a61e"}, "cliponaxis": False,
                       "name": f"Google per-count (ε 0.66, threshold 100), {who} ({trips} trips)"})
    traces.append({"type": "scatter", "x": [_rep["epsilon_user_week"]], "y": [_rep["trips_published_frac"]],
                   "mode": "markers", "marker": {"size": 14, "symbol": "star"},
                   "name": "this design (one seeded release)"})
    fig = go.Figure(data=traces)
    styled(fig, f"Share of user-trips published against ε {unit_words('user_level')}, week {_rep['week']}",
           height=480)
    layout = {}
    if not projector_on:   # the legend under the plot on a screen too: at its right it squeezed the plot to a third
        extra = sum(1 for t in fig.data if t.name) * 20 + 10
        layout.update(legend=legend_at({}, True), height=480 + extra, margin={"b": 70 + extra})
    layout.update(xaxis_title=f"ε {unit_words('user_level')} (tight, δ = {d / 2:.0e} + thresholding)",
                  yaxis_title="share of user-trips on published pairs", xaxis_type="log", yaxis_tickformat=".0%")
    xs = [*front["epsilon_user_week"], g["epsilon_user_week_typical"], g["epsilon_user_week_max"],
          _rep["epsilon_user_week"]]
    xs = [float(x) for x in xs if x is not None and float(x) > 0]
    if xs:   # plain tick labels, not plotly's minor digits ("5 0.1 2 5 1 2")
        vals, labels = readable_log_ticks(min(xs) / 1.2, max(xs) * 1.2)
        layout.update(xaxis_tickvals=vals, xaxis_ticktext=labels)
    fig.update_layout(**layout)   # one update: each walks the template-laden layout
    return fig, front


def _finite(values) -> list:
    """Floats, None for a missing or non-finite value (JSON has no NaN; the browser leaves a gap)."""
    return [float(v) if v is not None and math.isfinite(float(v)) else None for v in values]


@cache_resource(max_entries=16, show_spinner=False)
def frontier_chart(report_key: tuple, _rep: dict) -> dict:
    """The Release designer's frontier chart of one report as the live component draws it
    (:func:`odapp.live.view.frontier`; ``report_key``: the arguments of ``cache.design_report``): the same traces,
    names, colours and axes as :func:`frontier_figure`, which stays for the PNG/SVG files. Drawn on a canvas, a
    press that changes the design repaints it in a few milliseconds instead of plotly's ~140 ms. Read-only."""
    g, d = _rep["google"], _rep["goal"]["delta"]
    front = pd.DataFrame(_rep["frontier"])
    series = []
    for i, (m, grp) in enumerate(front.groupby("max_pairs")):
        useful = grp["useful"].tolist() if "useful" in grp else [True] * len(grp)
        x, y = (_finite(grp[c]) for c in ("epsilon_user_week", "trips_published_frac"))
        err = _finite(grp["relative_error"]) if "relative_error" in grp else [None] * len(grp)
        hover = [None if xx is None or yy is None else f"max pairs {m}, ε {xx:.3g}: {pct(yy)} of user-trips"
                 + ("" if e is None else f", expected error {pct(e)}") for xx, yy, e in zip(x, y, err, strict=True)]
        series.append({"name": f"max pairs {m} (threshold fitted, δ ≤ {d:.0e})", "key": f"max_pairs_{m}", "x": x,
                       "y": y, "marker": 4, "line": True, "width": 2, "open": [not bool(u) for u in useful],
                       "hover": hover, "color": PALETTE[i % 5]})

    def point(name, key, x, y, symbol, size, colour):   # one marker, left out when it has no place on the axes
        x, y = _finite([x])[0], _finite([y])[0]
        ok = x is not None and y is not None and x > 0
        series.append({"name": name, "key": key, "x": [x if ok else None], "y": [y if ok else None],
                       "marker": size, "symbol": symbol, "color": colour,
                       "hover": [f"{name}: ε {x:.3g}, {pct(y)} of user-trips" if ok else None]})

    for who, key, trips, symbol in (("typical person", "epsilon_user_week_typical", g["typical_trips"], "x"),
                                    ("busiest person", "epsilon_user_week_max", g["max_trips"], "diamond")):
        point(f"Google per-count (ε 0.66, threshold 100), {who} ({trips} trips)", f"google_{who.split()[0]}",
              g[key], g["trips_published_frac"], symbol, 6, PALETTE[5])
    point("this design (one seeded release)", "design", _rep["epsilon_user_week"], _rep["trips_published_frac"],
          "star", 7, PALETTE[7])
    xs = [x for s_ in series for x in s_["x"] if x is not None and x > 0]
    top = max([y for s_ in series for y in s_["y"] if y is not None] + [0.01])
    chart = {"id": "frontier", "title": f"Share of user-trips published against ε {unit_words('user_level')}, "
                                        f"week {_rep['week']}",
             "xlabel": f"ε {unit_words('user_level')} (tight, δ = {d / 2:.0e} + thresholding)",
             "ylabel": "share of user-trips on published pairs", "xlog": True, "ypct": True,
             "ymin": -0.04 * top, "ymax": 1.08 * top,   # room for the markers at 0 and at the top
             "legend": "below", "height": 420, "series": series}
    if xs:   # plain tick labels, with room for the markers at both ends
        lo, hi = min(xs) / 1.2, max(xs) * 1.2
        vals, labels = readable_log_ticks(lo, hi)
        chart.update(xmin=lo, xmax=hi, xtickvals=vals, xticktext=labels)
    return chart
