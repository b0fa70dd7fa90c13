"""The release report that may be shared: one self-contained, printable HTML file built from the published table and
the public settings only.

:func:`public_report_html` takes the published table (:data:`odcore.privacy.release.PUBLISHED_COLUMNS`, zone names
where present), the settings a provider announces (:class:`PublicSettings`) and the published map as PNG bytes
(:func:`published_map_png`, drawn by :func:`odcore.report.figures.flow_map_figure` from the published table and the
zone outlines of the published pairs); nothing else reaches it, so two datasets that publish the same table give the
same file, byte for byte, apart from the time written. The do-not-share version, with the truth, is
:mod:`odcore.report.private_report`.

The file makes no outside request: inline CSS, system fonts, the map as a ``data:`` URI, no script.
"""

from __future__ import annotations

import base64
import functools
import html
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from odcore.constants import DESTINATION, NOISY_COUNT, ORIGIN, WEEK
from odcore.errors import ParameterError, check_int, check_positive, check_prob
from odcore.privacy.accounting import person_week, user_level_budget
from odcore.privacy.attack import bounded_success_curve
from odcore.privacy.release import threshold_delta
from odcore.privacy.risk import risk_measures
from odcore.report import figures
from odcore.report.sheet import number_text, percent_text, posterior_with_delta, software_version
from odcore.report.utility_measures import haversine_km

__all__ = ["PUBLIC_REPORT_NAME", "REFERENCE_TRIPS", "REPORT_CSS", "PublicSettings", "guarantee_rows", "page",
           "public_report_html", "public_sections", "published_map_figure", "published_map_png",
           "published_summary"]

PUBLIC_REPORT_NAME = "report.html"
REFERENCE_TRIPS = (1, 10, 70)   # unique trips a week of the reference people of a per-count release (70: Houssiau)
MAP_SIZE_IN = (9.0, 6.5)
MAP_DPI = 110

REPORT_CSS = """
:root{--ink:#1b1f24;--rule:#ccd3dd;--head:#f2f4f7;--warn:#8a1c1c}
*{box-sizing:border-box}
body{font-family:Georgia,'DejaVu Serif','Liberation Serif',serif;color:var(--ink);line-height:1.45;margin:0;
padding:1.2em 1.5em;max-width:62em;margin:0 auto;font-size:16px}
h1{font-size:1.55em;margin:.2em 0}h2{font-size:1.15em;margin:1.4em 0 .4em;border-bottom:1px solid var(--rule)}
h3{font-size:1em;margin:1em 0 .3em}
p{margin:.4em 0}.note{color:#4a5260;font-size:.9em}.big{font-size:1.12em;font-weight:bold}
.banner{padding:.6em .9em;border:2px solid #2f6f3e;background:#eef7f0;margin:.6em 0}
.banner.private{border-color:var(--warn);background:#fbeeee;color:var(--warn);font-weight:bold}
.wrap{overflow-x:auto}
table{border-collapse:collapse;width:100%;margin:.4em 0;font-size:.95em}
td,th{border:1px solid var(--rule);padding:.3em .5em;text-align:left;vertical-align:top}
th{background:var(--head)}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:.6em 0}figure img{width:100%;height:auto;border:1px solid var(--rule)}
figcaption{font-size:.9em;color:#4a5260}
.cols{display:flex;flex-wrap:wrap;gap:1em}.cols>div{flex:1 1 22em;min-width:0}
@media print{body{max-width:none;padding:0;font-size:10.5pt}h2{break-after:avoid}
table,figure,.banner{break-inside:avoid}.cols{display:block}}
"""


@dataclass(frozen=True)
class PublicSettings:
    """What a provider announces with a release (no seed, nothing about the data).

    Parameters
    ----------
    epsilon, threshold, mode, max_pairs:
        The release: Laplace ε (per count, or per person and week with ``max_pairs``), threshold τ, ``per_metric``
        or ``user_level``, the contribution bound m (user level).
    weeks, delta:
        The guarantee's horizon (weekly releases it covers) and the person's δ over them.
    zones:
        The zone system in words (e.g. ``square:1.3``).
    title:
        The release's name as the provider gives it.
    goal_epsilon:
        The per-person ε per week the designer was asked for (None: no goal given).
    """

    epsilon: float
    threshold: float
    mode: str = "user_level"
    max_pairs: int | None = 10
    weeks: int = 52
    delta: float = 1e-6
    zones: str = ""
    title: str = "Weekly origin–destination counts"
    goal_epsilon: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon))
        object.__setattr__(self, "threshold", check_positive("threshold", self.threshold))
        if self.mode not in ("per_metric", "user_level"):
            raise ParameterError(f"mode must be 'per_metric' or 'user_level', got mode={self.mode!r}.")
        if self.mode == "user_level":
            object.__setattr__(self, "max_pairs", check_int("max_pairs", self.max_pairs, minimum=1))
        else:
            object.__setattr__(self, "max_pairs", None)
        object.__setattr__(self, "weeks", check_int("weeks", self.weeks, minimum=1))
        object.__setattr__(self, "delta", check_prob("delta", self.delta))
        if self.goal_epsilon is not None:
            object.__setattr__(self, "goal_epsilon", check_positive("goal_epsilon", self.goal_epsilon))

    @property
    def noise_scale(self) -> float:
        return (self.max_pairs or 1) / self.epsilon

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------------------------------------------
# Figures from the settings alone
# ---------------------------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=32)
def _guarantee(s: PublicSettings) -> dict:
    return _guarantee_rows(s)


def guarantee_rows(s: PublicSettings) -> dict:
    """The guarantee in both units from the settings alone: ``per_count`` (ε, δ of one count) and ``per_person``
    (rows of ε, δ per week and over ``weeks`` weeks, and the attacker's best success (e^ε + δ)/(1 + e^ε)), each in
    the tight accounting of :mod:`odcore.privacy.accounting` (computed once per settings)."""
    g = _guarantee(s)
    return {"per_count": dict(g["per_count"]), "per_person": [dict(r) for r in g["per_person"]]}


def _guarantee_rows(s: PublicSettings) -> dict:
    if s.mode == "user_level":
        m = s.max_pairs
        b = user_level_budget(s.epsilon, m, s.threshold, s.weeks, s.delta)
        per_count = {"epsilon": s.epsilon / m, "delta": threshold_delta(s.epsilon, s.threshold, m, 1)}
        rows = [{"who": "any person, one week", "trips": None, "epsilon": b["epsilon_user_week_tight"],
                 "delta": b["delta_user_week_tight"]},
                {"who": f"any person, {s.weeks} weeks", "trips": None, "epsilon": b["epsilon_user_total_tight"],
                 "delta": b["delta_user_total_tight"]}]
    else:
        per_count = {"epsilon": s.epsilon, "delta": threshold_delta(s.epsilon, s.threshold, 1, 1)}
        rows = []
        for n in REFERENCE_TRIPS:
            pw = person_week("per_metric", s.epsilon, s.threshold, n, delta=s.delta)
            rows.append({"who": f"a person with {n} unique trip{'s' if n > 1 else ''} a week, one week", "trips": n,
                         "epsilon": pw["epsilon_person_week"], "delta": pw["delta_person_week"]})
    for r in rows:
        r["attacker_success"] = posterior_with_delta(r["epsilon"], r["delta"])
    return {"per_count": per_count, "per_person": rows}


def attack_summary(s: PublicSettings) -> dict:
    """The best membership attacker against the settings (no data needed): for a per-person release, the attacker
    who knows all of a person's trips and everyone else's (:func:`odcore.privacy.risk.risk_measures`) and the
    success curve's plateau from ``max_pairs`` trips on; per count, the success for the reference people."""
    if s.mode == "user_level":
        rk = risk_measures(s.epsilon, s.max_pairs, s.threshold, fpr=0.01, prior=0.5)
        curve = bounded_success_curve(s.epsilon, s.max_pairs, s.max_pairs, threshold=s.threshold)
        return {"tpr_at_1pct": rk["full"]["tpr"], "advantage": rk["full"]["advantage"],
                "success": rk["full"]["success"], "posterior": rk["full"]["posterior"],
                "giveaway": rk["delta_partition"], "plateau": float(curve[-1])}
    return {"by_trips": [(r["trips"], r["attacker_success"]) for r in guarantee_rows(s)["per_person"]]}


# ---------------------------------------------------------------------------------------------------------------
# Figures from the published table
# ---------------------------------------------------------------------------------------------------------------

def _check_published(published: pd.DataFrame) -> pd.DataFrame:
    if not isinstance(published, pd.DataFrame):
        raise ParameterError(f"published table must be a pandas DataFrame, got {type(published).__name__}.")
    need = (ORIGIN, DESTINATION, NOISY_COUNT, "origin_lat", "origin_lon", "destination_lat", "destination_lon")
    miss = [c for c in need if c not in published.columns]
    if miss:
        raise ParameterError(f"published table misses column(s) {miss}; expected the published table of a release "
                             "(published.csv).")
    return published


def published_summary(published: pd.DataFrame, top: int = 15) -> dict:
    """What the published table says, from it alone: weeks, pairs, the sum of noisy counts, count quantiles, flow
    lengths (km between the published zone centres, weighted by noisy count) and the ``top`` largest flows."""
    p = _check_published(published)
    counts = p[NOISY_COUNT].to_numpy(float)
    km = haversine_km(p["origin_lat"].to_numpy(float), p["origin_lon"].to_numpy(float),
                      p["destination_lat"].to_numpy(float), p["destination_lon"].to_numpy(float))
    order = np.lexsort((p[DESTINATION].to_numpy(), p[ORIGIN].to_numpy(),
                        p[WEEK].to_numpy() if WEEK in p.columns else np.zeros(len(p)), -counts))
    cols = [c for c in (WEEK, ORIGIN, "origin_name", DESTINATION, "destination_name", NOISY_COUNT) if c in p.columns]
    t = p.iloc[order[:top]][cols].copy()
    t["km"] = km[order[:top]]
    q = np.quantile(counts, [0, 0.25, 0.5, 0.75, 1]) if len(p) else np.full(5, np.nan)
    return {
        "weeks": sorted(int(w) for w in p[WEEK].unique()) if WEEK in p.columns else [],
        "week_starts": sorted({str(w) for w in p["week_start"]}) if "week_start" in p.columns else [],
        "pairs": len(p), "noisy_total": float(counts.sum()), "quantiles": q.tolist(),
        "zones": int(np.union1d(p[ORIGIN].to_numpy(), p[DESTINATION].to_numpy()).size),
        "mean_km": float(np.average(km, weights=counts)) if len(p) and counts.sum() > 0 else float("nan"),
        "within_zone_share": float(counts[km == 0].sum() / counts.sum()) if counts.sum() > 0 else float("nan"),
        "top": t,
    }


def published_map_figure(published: pd.DataFrame, zones, s: PublicSettings, *, top: int = 300):
    """The published flows of the table on a map (:func:`odcore.report.figures.flow_map_figure`): the published
    zones outlined (no shading: their release chances would need the true counts), the ``top`` largest noisy flows
    as arrows, places sized by their published totals."""
    p = _check_published(published)
    if WEEK in p.columns and p[WEEK].nunique() > 1:
        wk = int(p[WEEK].min())
        p = p.loc[p[WEEK].to_numpy() == wk]
    cells = np.union1d(p[ORIGIN].to_numpy(np.int64), p[DESTINATION].to_numpy(np.int64))
    polys = zones.polygons(cells) if len(cells) else None
    rows = []
    if polys is not None:
        for c, g in zip(polys["cell"].to_numpy(), polys.geometry, strict=True):
            geoms = getattr(g, "geoms", [g])
            for part in geoms:
                rows.append({"cell": int(c), "polygon": np.asarray(part.exterior.coords)[:-1].tolist(), "value": np.nan})
    cell_df = pd.DataFrame(rows, columns=["cell", "polygon", "value"])
    big = p.sort_values([NOISY_COUNT, ORIGIN, DESTINATION], ascending=[False, True, True]).head(int(top))
    flows = pd.DataFrame({"o_lon": big["origin_lon"].to_numpy(float), "o_lat": big["origin_lat"].to_numpy(float),
                          "d_lon": big["destination_lon"].to_numpy(float),
                          "d_lat": big["destination_lat"].to_numpy(float),
                          "count": big[NOISY_COUNT].to_numpy(float)})
    ends = pd.concat([pd.DataFrame({"lon": p["origin_lon"], "lat": p["origin_lat"], "total": p[NOISY_COUNT]}),
                      pd.DataFrame({"lon": p["destination_lon"], "lat": p["destination_lat"], "total": p[NOISY_COUNT]})])
    places = ends.groupby(["lon", "lat"], as_index=False, sort=True)["total"].sum()
    unit = "per person and week" if s.mode == "user_level" else "per count"
    week_words = f", week {int(p[WEEK].iloc[0])}" if WEEK in p.columns and len(p) else ""
    return _without_zone_shading_legend(figures.flow_map_figure(
        cell_df, flows, title=f"Published OD flows{week_words}", count_label="noisy count",
        cell_label="zone of a published pair",
        subtitle=f"ε = {s.epsilon:g} {unit}, threshold {s.threshold:g}, {len(flows):,} largest of {len(p):,} "
                 "published flows",
        empty_note=None if len(flows) else f"Nothing published at threshold {s.threshold:g}",
        locations=places if len(places) else None))


ZONE_SHADING_TITLE = "Zones: chance at least"   # the first legend row of the zones' shading (flow_map_figure)


def _without_zone_shading_legend(fig):
    """The figure without the legend rows of the zones' shading (the chance that a flow leaving a zone is published,
    which needs the true counts): the public map outlines its zones and shades none, so those rows would describe
    nothing on it. The rows below them move up and the legend's frame shrinks to fit."""
    anns = list(fig.layout.annotations)
    rows = [a for a in anns if a.name == "legend" and a.text != " " and a.yshift is not None]
    start = [a for a in rows if ZONE_SHADING_TITLE in (a.text or "")]
    if not start or len(rows) < 2:
        return fig
    row_h = abs(rows[1].yshift - rows[0].yshift)
    y0 = start[0].yshift                                          # first removed row's centre (rows go down)
    gone = 2 + figures.P_CLASSES                                  # two title lines and the shade classes
    lo = y0 - (gone - 0.5) * row_h                                # below the removed block

    def removed(y: float) -> bool:
        return lo < y <= y0 + 0.5 * row_h

    keep = []
    for a in anns:
        if a.name == "legend" and a.text == " ":
            a.height = a.height - gone * row_h
        elif a.name == "legend" and a.yshift is not None and removed(a.yshift):
            continue
        elif a.name == "legend" and a.yshift is not None and a.yshift <= lo:
            a.yshift = a.yshift + gone * row_h
        keep.append(a)
    shapes = []
    for sh in fig.layout.shapes:
        if sh.name == "legend" and sh.y0 is not None:
            yc = (sh.y0 + sh.y1) / 2
            if removed(yc):
                continue
            if yc <= lo:
                sh.y0, sh.y1 = sh.y0 + gone * row_h, sh.y1 + gone * row_h
        shapes.append(sh)
    fig.layout.annotations = keep
    fig.layout.shapes = shapes
    return fig


def published_map_png(published: pd.DataFrame, zones, s: PublicSettings) -> bytes:
    """:func:`published_map_figure` as PNG bytes (Chromium via kaleido; :class:`odcore.errors.MissingBrowserError`
    without one)."""
    return figures.image_bytes(published_map_figure(published, zones, s), "png", width_in=MAP_SIZE_IN[0],
                               height_in=MAP_SIZE_IN[1], dpi=MAP_DPI)


# ---------------------------------------------------------------------------------------------------------------
# HTML
# ---------------------------------------------------------------------------------------------------------------

_e = html.escape
num = number_text
pct = percent_text


def _table(head: list[str], rows: list[list], numeric: set[int] = frozenset()) -> str:
    h = "".join(f"<th{' class=n' if i in numeric else ''}>{_e(str(c))}</th>" for i, c in enumerate(head))
    body = "".join("<tr>" + "".join(f"<td{' class=n' if i in numeric else ''}>{_e(str(v))}</td>"
                                    for i, v in enumerate(r)) + "</tr>" for r in rows)
    return f"<div class=wrap><table><tr>{h}</tr>{body}</table></div>"


def page(title: str, body: str) -> str:
    """A whole HTML document: inline CSS, no script, no outside reference."""
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{_e(title)}</title>"
            f"<style>{REPORT_CSS}</style></head><body>{body}</body></html>\n")


def _settings_table(s: PublicSettings) -> str:
    sw = software_version()
    rows = [["Guarantee unit", "one person, all of their trips" if s.mode == "user_level"
             else "one count (one person's presence on one pair in one week)"],
            ["ε (Laplace)", f"{s.epsilon:g} " + ("per person and week" if s.mode == "user_level" else "per count")],
            ["Noise scale", f"{num(s.noise_scale)} (Laplace)"],
            ["Threshold", f"a pair is published when its noisy count reaches {s.threshold:g}"]]
    if s.mode == "user_level":
        rows.append(["Contribution bound", f"each person counts in at most {s.max_pairs} pairs a week"])
    rows += [["Horizon, δ", f"{s.weeks} weekly releases; δ = {num(s.delta)} for a person over them"],
             ["Zones", s.zones or "–"],
             ["Software", f"odcore {sw['odcore']}, commit {sw['commit'] or 'unknown'}"]]
    return _table(["Setting", "Value"], rows)


def _guarantee_html(s: PublicSettings) -> str:
    g = guarantee_rows(s)
    pc = g["per_count"]
    rows = [[r["who"], num(r["epsilon"]), num(r["delta"]), pct(r["attacker_success"])] for r in g["per_person"]]
    unit_words = ("Per person (the unit this release promises): a person's whole contribution — every trip, every "
                  "week." if s.mode == "user_level" else
                  "Per person (not promised by a per-count release: a person in n pairs a week is n counts; the "
                  "rows are reference people):")
    return (
        "<h2>The guarantee, in both units</h2>"
        f"<p><b>Per count</b> (one person's presence on one pair in one week): ε = <b>{num(pc['epsilon'])}</b>, "
        f"δ = {num(pc['delta'])} (the chance that the threshold lets a count of one person through).</p>"
        f"<p><b>{_e(unit_words)}</b></p>"
        + _table(["Who", "ε", "δ (threshold part included)", "Attacker right at most"], rows, {1, 2, 3})
        + "<p class=note>Tight ε of the exact privacy-loss distribution (odcore.privacy.accounting). The attacker "
          "guesses whether the person is in the data (a coin flip is 50 %); (e<sup>ε</sup> + δ)/(1 + e<sup>ε</sup>) "
          "bounds any attacker.</p>")


def _attack_html(s: PublicSettings) -> str:
    a = attack_summary(s)
    if s.mode == "user_level":
        return ("<h2>Attack summary</h2>"
                f"<p>The strongest attacker — who knows everyone else's trips and all of a person's trips in a week — "
                f"guessing whether that person is in the data is right at most <b>{pct(a['success'])}</b> of the "
                f"time (a coin flip is 50 %); at a false-positive rate of 1 % it finds at most "
                f"<b>{pct(a['tpr_at_1pct'], 2)}</b> of the people who are in. Knowing more than {s.max_pairs} trips "
                f"does not help: the success curve is flat from there ({pct(a['plateau'])}). The chance of a "
                f"giveaway — a pair only this person makes being published — is {num(a['giveaway'])}.</p>"
                "<p class=note>Upper bounds from the exact trade-off curve of the release (odcore.privacy.risk), "
                "independent of the data.</p>")
    rows = [[n, pct(p)] for n, p in a["by_trips"]]
    return ("<h2>Attack summary</h2><p>Per count, a person in more pairs is less protected: the strongest attacker's "
            "success for reference people.</p>" + _table(["Unique trips a week", "Attacker right at most"], rows, {0, 1}))


def _verdict_public_html(s: PublicSettings) -> str:
    g = guarantee_rows(s)["per_person"][0]
    if s.goal_epsilon is None:
        goal = "No per-person goal was given to the designer."
    else:
        met = s.mode == "user_level" and g["epsilon"] <= s.goal_epsilon * (1 + 1e-9)
        goal = (f"The designer was asked for at most ε = {s.goal_epsilon:g} per person and week: "
                + ("met" if met else "NOT met") + f" (ε = {num(g['epsilon'])}).")
    strength = ("strong" if g["epsilon"] <= 1 else "moderate" if g["epsilon"] <= 10 else "weak")
    return ("<h2>Designer's verdict on the guarantee</h2>"
            f"<p class=big>{_e(goal)}</p>"
            f"<p>ε per person and week {num(g['epsilon'])}: a {strength} guarantee (values up to about 1 are usually "
            "called strong, above 10 weak).</p>"
            "<p class=note>The other half of the designer's verdict — whether the counts are accurate enough to be "
            "useful — is computed on the true data and is kept in the do-not-share version of this report.</p>")


def _published_html(published: pd.DataFrame, map_png: bytes | None) -> str:
    sm = published_summary(published)
    q = sm["quantiles"]
    parts = ["<h2>What is published</h2>"]
    if not sm["pairs"]:
        parts.append("<p class=big>Nothing is published: no pair's noisy count reached the threshold.</p>")
    elif map_png:
        uri = "data:image/png;base64," + base64.b64encode(map_png).decode("ascii")
        parts.append(f"<figure><img src='{uri}' alt='Map of the published origin–destination flows'>"
                     "<figcaption>The published flows: arrows by noisy count, the published zones outlined, places "
                     "sized by their published totals.</figcaption></figure>")
    weeks = ", ".join(f"{w}" for w in sm["weeks"]) or "–"
    starts = ", ".join(sm["week_starts"])
    parts.append(_table(["Published", "Value"], [
        ["Weeks", weeks + (f" (from {starts})" if starts else "")],
        ["Origin–destination pairs published", num(sm["pairs"])],
        ["Zones in them", num(sm["zones"])],
        ["Sum of the noisy counts", num(round(sm["noisy_total"], 1))],
        ["Noisy count: min · quartiles · max", " · ".join(num(round(v, 1)) for v in q) if sm["pairs"] else "–"],
        ["Mean flow length (km between zone centres, by noisy count)", num(sm["mean_km"])],
        ["Share of the noisy counts within one zone", pct(sm["within_zone_share"])],
    ]))
    t = sm["top"]
    if len(t):
        head = [c.replace("_", " ") for c in t.columns]
        rows = [[(num(round(float(v), 1)) if c in (NOISY_COUNT, "km") else v) for c, v in zip(t.columns, r, strict=True)]
                for r in t.itertuples(index=False)]
        parts.append(f"<h3>The {len(t)} largest published flows</h3>"
                     + _table(head, rows, {i for i, c in enumerate(t.columns) if c in (NOISY_COUNT, "km", WEEK)}))
    parts.append("<p class=note>Every figure in this section is read from the published table (published.csv): the "
                 "published pairs and their noisy counts. Nothing about unpublished pairs, no true count, no noise, "
                 "no seed.</p>")
    return "".join(parts)


def public_sections(published: pd.DataFrame, s: PublicSettings, *, map_png: bytes | None) -> str:
    """The public report's body after its heading (the do-not-share report repeats it before its own parts)."""
    return (_published_html(published, map_png) + _guarantee_html(s) + _verdict_public_html(s) + _attack_html(s)
            + "<h2>Settings</h2>" + _settings_table(s))


def public_report_html(published: pd.DataFrame, settings: PublicSettings, *, map_png: bytes | None,
                       written: str) -> str:
    """The report that may be shared, as one HTML document.

    Parameters
    ----------
    published:
        The published table (published.csv: week, week_start, origin, destination, noisy_count, the zone centres,
        names where present).
    settings:
        :class:`PublicSettings`.
    map_png:
        :func:`published_map_png` of the same table, or None (no map).
    written:
        The time written (UTC, ISO), the only part that differs between two runs on the same published table.
    """
    if not isinstance(settings, PublicSettings):
        raise ParameterError(f"settings must be PublicSettings, got {type(settings).__name__}.")
    s = settings
    body = (f"<h1>{_e(s.title)}</h1>"
            "<div class=banner>May be shared: built only from the published table and the public settings.</div>"
            + public_sections(published, s, map_png=map_png)
            + f"<p class=note>Written (UTC) {_e(written)} by OD Privacy Lab (odcore.report.release_report).</p>")
    return page(f"Release report — {s.title}", body)
