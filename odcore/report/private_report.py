"""The do-not-share release report, and the one place both reports of a release are made.

:func:`private_report_html` adds to the public report (:mod:`odcore.report.release_report`) what only the provider may
read: the release against the truth in the field's measures (:mod:`odcore.report.utility_measures`), the RMSE split
into bounding, noise and dropped pairs, the designer's full verdict (its utility half is computed on the true data)
and the audit of the guarantee on the week's data. Its file name says so (:data:`PRIVATE_REPORT_NAME`).

:func:`release_reports` runs one week's release and returns both documents; the public one is built by
:func:`odcore.report.release_report.public_report_html` from the published table and the public settings alone.
"""

from __future__ import annotations

import datetime as dt
import html
from dataclasses import dataclass

import numpy as np
import pandas as pd

from odcore.constants import UNIQUE_TRIPS, WEEK
from odcore.errors import ParameterError
from odcore.privacy.audit import AuditConfig, audit_one_run
from odcore.privacy.design import Goal, design_report, verdict_rows
from odcore.privacy.release import Mode, ReleaseConfig, published_table, release_with_report
from odcore.privacy.utility import release_utility
from odcore.report.release_report import (
    PublicSettings,
    guarantee_rows,
    page,
    public_report_html,
    public_sections,
    published_map_png,
)
from odcore.report.sheet import number_text, percent_text
from odcore.report.utility_measures import TOP_N, release_vs_truth
from odcore.space.zones import add_zone_names, zones_summary

__all__ = ["PRIVATE_NOTICE", "PRIVATE_REPORT_NAME", "ReleaseReports", "private_report_html", "release_reports"]

PRIVATE_REPORT_NAME = "DO_NOT_SHARE_report.html"
PRIVATE_NOTICE = ("DO NOT SHARE: this report compares the release with the true counts, runs an audit on the true "
                  "data and gives the designer's verdict computed on them; it discloses what the release protects. "
                  "Share only report.html.")

_e = html.escape
num = number_text
pct = percent_text


def _f(x, digits: int = 3) -> str:
    if x is None:
        return "–"
    x = float(x)
    if not np.isfinite(x):
        return "∞" if x > 0 else "–"
    return f"{x:.{digits}f}"


def _table(head: list[str], rows: list[list]) -> str:
    h = "".join(f"<th>{_e(str(c))}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{_e(str(v))}</td>" for v in r) + "</tr>" for r in rows)
    return f"<div class=wrap><table><tr>{h}</tr>{body}</table></div>"


def _truth_html(m: dict, util: dict) -> str:
    rows = [
        ["Pairs published", f"{num(m['pairs_published'])} of {num(m['pairs_total'])} ({pct(m['pairs_published_frac'])})"],
        ["User-trips on published pairs", f"{num(m['trips_published'])} of {num(m['trips_total'])} "
                                          f"({pct(m['trips_published_frac'])})"],
        ["Mean relative error of published counts (vs true count before bounding)",
         pct(util.get("mean_relative_error"))],
        ["SMAPE of the OD flows (shares, union of pairs; 0 best, 2 worst)", _f(m.get("smape"))],
        ["Jensen–Shannon distance (0 best, 0.833 worst)", _f(m.get("jsd"))],
        ["KL divergence (release ‖ truth)", _f(m.get("kl"))],
        ["Earth mover's distance over flow lengths (km)", _f(m.get("emd_length_km"))],
        ["Earth mover's distance over zones (km, trip ends)",
         _f(m.get("emd_zones_km")) if m.get("emd_zones_km") is not None else "not computed: "
         + str(m.get("emd_zones_note", "no centres"))],
        ["Mean flow length: truth / release (km)", f"{_f(m.get('mean_length_km_base'), 2)} / "
                                                   f"{_f(m.get('mean_length_km_other'), 2)}"],
    ]
    for n, t in sorted(m.get("top_n", {}).items()):
        rows.append([f"Top {n} flows: coverage · Kendall τ-b", f"{pct(t['coverage'])} · {_f(t['kendall_tau'])}"])
    out = ("<h2>The release against the truth</h2>"
           + _table(["Measure", "Value"], rows)
           + "<p class=note>Definitions as dp-mobility-report's benchmark (SMAPE, Jensen–Shannon, KL on the flows' "
             "shares over the union of pairs; top-N coverage), with the differences said in docs/utility_measures.md "
             "(Kendall τ-b over the truth's top N; exact earth mover's distances in km).</p>")
    r, e = m["rmse"], m.get("rmse_expected")
    head = ["Part of the mean squared error", "This release", "Expected over the noise"]
    names = [("bounding", "contribution bounding (people cut from a pair), published pairs"),
             ("noise", "noise, published pairs"), ("cross", "bounding × noise, published pairs"),
             ("dropped", "pairs not published (their whole count)")]
    rr = [[w, _f(r[k], 3), _f(e[k], 3) if e else "–"] for k, w in names]
    rr.append(["RMSE (square root of the sum)", _f(r["rmse"], 3), _f(e["rmse"], 3) if e else "–"])
    out += ("<h3>RMSE split (PipelineDP's utility analysis, in squared units so the parts add up)</h3>"
            + _table(head, rr)
            + f"<p class=note>Over all {num(r['pairs'])} observed pairs: error = published count − true count before "
              "bounding, or − true count for a pair not published. Expected parts: exact Laplace moments given the "
              "bounding.</p>")
    return out


def _design_html(rep: dict | None, note: str | None = None) -> str:
    if rep is None and note:
        return "<h2>Designer's verdict</h2><p>The designer was not asked for a verdict on this release.</p>"
    if rep is None:
        return ("<h2>Designer's verdict</h2><p>The designer designs per-person releases; this release promises a "
                "guarantee per count, so there is no verdict for it.</p>")
    v = rep["verdict"]
    rows = [[k, val] for k, val in verdict_rows(rep)]
    change = "".join(f"<li>{_e(c['words'])}</li>" for c in rep.get("would_change") or [])
    return ("<h2>Designer's verdict</h2>"
            f"<p class=big>{_e(v['headline'])}</p>"
            + (f"<p>What would change it:</p><ul>{change}</ul>" if change else "")
            + _table(["Figure", "Value"], rows)
            + f"<p class=note>{_e(rep['tuning_note'])} Expected figures: exact means over the noise on the true data "
              "of the week.</p>")


def _audit_html(a: dict | None) -> str:
    if a is None:
        return ""
    return ("<h2>Audit on the week's data</h2>"
            f"<p>One-run audit (Steinke, Nasr and Jagielski 2023): {num(a['canaries'])} canary people of "
            f"{num(a['trips'])} pairs each, half of them in; the auditor guessed on {num(a['guesses'])} and was right "
            f"{num(a['correct'])} times. Empirical lower bound on ε (95 % confidence): <b>{_f(a['epsilon_lower'], 2)}"
            f"</b>, beside the guarantee's ε = <b>{_f(a['epsilon_theory'], 2)}</b> per person and week.</p>"
            "<p class=note>A lower bound under the guarantee is what a correct implementation shows; one above it "
            "would be a bug.</p>")


def private_report_html(published: pd.DataFrame, settings: PublicSettings, *, map_png: bytes | None, written: str,
                        measures: dict, utility: dict, design: dict | None = None, audit: dict | None = None,
                        mode_note: str | None = None) -> str:
    """The do-not-share report: its notice, the truth comparisons (``measures`` of
    :func:`odcore.report.utility_measures.release_vs_truth`, ``utility`` of
    :func:`odcore.privacy.utility.release_utility`), the designer's verdict (``design``,
    :func:`odcore.privacy.design.design_report`), the audit (``audit``, :meth:`odcore.privacy.audit.AuditResult.
    to_dict`), then every section of the public report. ``mode_note``: why there is no verdict (the designer was not
    asked), when ``design`` is None for a per-person release."""
    s = settings
    body = (f"<h1>{_e(s.title)} — analysis</h1>"
            f"<div class='banner private'>{_e(PRIVATE_NOTICE)}</div>"
            + _design_html(design, mode_note) + _truth_html(measures, utility) + _audit_html(audit)
            + "<h2 style='margin-top:2em'>As published</h2>"
            + public_sections(published, s, map_png=map_png)
            + f"<p class=note>Written (UTC) {_e(written)} by OD Privacy Lab (odcore.report.private_report).</p>")
    return page(f"DO NOT SHARE — {s.title}", body)


@dataclass(frozen=True)
class ReleaseReports:
    """Both documents of one release and what they were made from."""

    public_html: str
    private_html: str
    published: pd.DataFrame
    settings: PublicSettings
    measures: dict
    design: dict | None


def release_reports(od, week: int, config: ReleaseConfig, *, weeks: int = 52, delta: float = 1e-6,
                    goal_epsilon: float | None = None, design: dict | None = None, seed: int = 0,
                    with_map: bool = True, audit: bool = True, verdict: bool = True, title: str = "Weekly origin–destination counts",
                    written: str | None = None, top_n=TOP_N) -> ReleaseReports:
    """One week's release and its two reports.

    Parameters
    ----------
    od:
        :class:`odcore.od.oddata.ODData` with per-person pairs.
    week, config, seed:
        The week, the release's settings and its seed (the release is :func:`release_with_report` of the week's
        pairs with ``rng=seed``).
    weeks, delta:
        The guarantee's horizon and the person's δ.
    goal_epsilon, design:
        The per-person ε per week the designer was asked for, and its report when it chose ``config``; without a
        report one is made for a user-level release (goal: ``goal_epsilon``, else the release's own ε per week;
        ``max_pairs`` fixed to the release's).
    with_map, audit, verdict:
        Draw the published map (needs Chromium); run the one-run audit on the week (person canaries of
        ``max_pairs`` pairs, or of one pair per count); ask the designer for its verdict when ``design`` is not
        given (False: the do-not-share report says it was not asked).
    written:
        The time written (default: now, UTC).
    """
    pairs = od.pairs
    wk_pairs = pairs.loc[pairs[WEEK].to_numpy() == int(week)]
    if not len(wk_pairs):
        raise ParameterError(f"week={week} has no trips.")
    res = release_with_report(wk_pairs, config, rng=seed)
    table = res.table
    published = add_zone_names(published_table(table, od.centroids(), od.week_starts), od.grid)
    zs = zones_summary(od.grid)
    settings = PublicSettings(epsilon=config.epsilon, threshold=config.threshold, mode=config.mode.value,
                              max_pairs=config.max_pairs, weeks=weeks, delta=delta,
                              zones=zs["spec"] or f"{od.grid.cell_km2:g} km² squares", title=title,
                              goal_epsilon=goal_epsilon)
    written = written or dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    png = published_map_png(published, od.grid, settings) if with_map and len(published) else None
    public = public_report_html(published, settings, map_png=png, written=written)

    # DO NOT SHARE from here: the true counts, the people, the audit on the data
    measures = release_vs_truth(table, od.centroids(), top_n=top_n, epsilon=config.epsilon,
                                threshold=config.threshold, sensitivity=config.sensitivity)
    util = release_utility(table)
    uw = od.user_week
    trips = uw.loc[uw[WEEK] == int(week), UNIQUE_TRIPS].to_numpy()
    if design is None and verdict and config.mode is Mode.USER_LEVEL:
        target = goal_epsilon if goal_epsilon is not None else guarantee_rows(settings)["per_person"][0]["epsilon"]
        design = design_report(Goal(kind="week", epsilon=float(target), delta=delta, weeks=weeks), wk_pairs, trips,
                               week=int(week), max_pairs=config.max_pairs, rng=seed)
    aud = None
    if audit:
        if config.mode is Mode.USER_LEVEL:
            acfg = AuditConfig(epsilon=config.epsilon / config.max_pairs, threshold=config.threshold, unit="person",
                               trips=config.max_pairs, delta=delta, canaries=1000)
        else:
            acfg = AuditConfig(epsilon=config.epsilon, threshold=config.threshold, unit="count", delta=delta,
                               canaries=1000)
        aud = audit_one_run(wk_pairs, acfg, week=int(week), rng=seed).to_dict()
    private = private_report_html(published, settings, map_png=png, written=written, measures=measures,
                                  utility=util, design=design, audit=aud,
                                  mode_note=None if verdict or design is not None else "not asked")
    return ReleaseReports(public, private, published, settings, measures, design)
