"""A one-page guarantee sheet for a release: self-contained, printable HTML with the numbers in plain words.

:func:`guarantee_sheet` reads a designer report (:func:`odcore.privacy.design.design_report`) and
:func:`budget_sheet` the ``budget`` figures of a user-level release (:func:`odcore.privacy.accounting.budget` with
``max_pairs``); both return one HTML string with inline CSS (no scripts, no external files), laid out for A4/Letter.
"""

from __future__ import annotations

import html
import math

__all__ = ["budget_sheet", "guarantee_sheet"]

_CSS = """
body{font-family:Georgia,'DejaVu Serif',serif;max-width:46em;margin:2em auto;color:#1b1f24;line-height:1.45}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.1em;margin:1.2em 0 .3em;border-bottom:1px solid #ccd}
table{border-collapse:collapse;width:100%;margin:.4em 0}td,th{border:1px solid #ccd;padding:.3em .5em;text-align:left}
th{background:#f2f4f7}.big{font-size:1.15em;font-weight:bold}.note{color:#555;font-size:.9em}
@media print{body{margin:0;max-width:none;font-size:11pt}h2{break-after:avoid}table{break-inside:avoid}}
"""


def _num(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if isinstance(x, int):
        return f"{x:,}"
    if abs(x) != 0 and (abs(x) < 1e-3 or abs(x) >= 1e6):
        return f"{x:.2e}"
    return f"{x:.{digits}g}"


def _pct(p) -> str:
    return "–" if p is None or not math.isfinite(p) else f"{100 * p:.1f} %"


def _odds(delta) -> str:
    """δ as 'about 1 in N'."""
    if delta is None or not delta > 0:
        return "never"
    if delta >= 0.5:
        return "more likely than not: no protection"
    return f"about 1 in {_num(float(round(1 / delta, -math.floor(math.log10(1 / delta)) + 1)))}"


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_CSS}</style></head><body>{body}</body></html>")


def _guarantee_rows(eps_week, d_week, eps_total, d_total, weeks) -> str:
    return (f"<table><tr><th></th><th>ε</th><th>δ (chance the guarantee fails)</th></tr>"
            f"<tr><td>one week</td><td class='big'>{_num(eps_week)}</td><td>{_num(d_week)} ({_odds(d_week)})</td></tr>"
            f"<tr><td>{weeks} weeks</td><td class='big'>{_num(eps_total)}</td><td>{_num(d_total)} "
            f"({_odds(d_total)})</td></tr></table>")


def guarantee_sheet(report: dict) -> str:
    """The guarantee sheet of a designed release (the dict of :func:`odcore.privacy.design.design_report`)."""
    r = report
    g = r["goal"]
    m, tau, scale, w = r["max_pairs"], r["threshold"], r["noise_scale"], r["weeks"]
    e = html.escape
    body = [
        "<h1>Guarantee sheet: weekly origin–destination counts</h1>",
        f"<p class='note'>Goal asked for: {e(g['words'])} — {'met' if r['goal_met'] else 'NOT met'}.</p>",
        "<h2>Who is protected</h2>",
        f"<p><b>One person, all of their trips, every week.</b> Each person counts in at most <b>{m}</b> origin–"
        f"destination pairs per week (a random choice among their trips; the others are left out). Every count "
        f"gets random noise of typical size {_num(scale)} people (Laplace, scale {_num(scale)}), and a pair is "
        f"published only if its noisy count reaches <b>{tau}</b>.</p>",
        "<h2>The guarantee (ε, δ) per person</h2>",
        _guarantee_rows(r["epsilon_user_week"], r["delta_user_week"], r["epsilon_user_total"],
                        r["delta_user_total"], w),
        f"<p>Smaller ε is stronger; values up to about 1 are usually considered strong, above 10 weak. "
        f"With ε = {_num(r['epsilon_user_week'])} for a week, anything an observer concludes about a person is at "
        f"most e^ε = {_num(math.exp(min(r['epsilon_user_week'], 700)))} times more (or less) likely with the "
        f"person in the data than without. These are the exact (tight) values of the privacy-loss distribution.</p>",
        "<h2>What an attacker can learn</h2>",
        f"<p>An attacker who knows everyone else's trips and all of a person's trips in a week, guessing whether "
        f"that person is in the data (a coin flip is 50 %):</p><table>"
        f"<tr><th>person</th><th>unique trips in the week</th><th>attacker right at most</th></tr>"
        f"<tr><td>typical</td><td>{r['typical_trips']}</td><td class='big'>{_pct(r['attack_success_typical'])}"
        f"</td></tr><tr><td>busiest</td><td>{r['busy_trips']}</td><td class='big'>"
        f"{_pct(r['attack_success_busy'])}</td></tr></table>",
    ]
    goog = r.get("google")
    if goog:
        body.append(
            f"<p class='note'>For comparison, Google's per-count setting (ε {goog['epsilon']} per count, threshold "
            f"{goog['threshold']}) gives the typical person ({goog['typical_trips']} trips) ε = "
            f"{_num(goog['epsilon_user_week_typical'])} per week and the busiest ({goog['max_trips']} trips) "
            f"ε = {_num(goog['epsilon_user_week_max'])}.</p>")
    body += [
        f"<h2>What is published (week {r['week']} of the data) and what it costs</h2>",
        f"<table><tr><td>pairs published</td><td>{_num(r['pairs_published'])} of {_num(r['pairs_total'])}</td></tr>"
        f"<tr><td>trips (person-pair) on published pairs</td><td>{_num(r['trips_published'])} of "
        f"{_num(r['trips_total'])} ({_pct(r['trips_published_frac'])})</td></tr>"
        f"<tr><td>mean relative error of published counts</td><td>{_pct(r['mean_relative_error'])}</td></tr>"
        f"<tr><td>published pairs whose true count is under {tau / 2:g} (mostly noise)</td>"
        f"<td>{_num(r['noise_dominated_published'])}</td></tr></table>",
        f"<p class='note'>{e(r['tuning_note'])}</p>",
        "<h2>Reproduce</h2>",
        f"<p class='note'><code>{e(r['budget_command'])}</code> prints the same budget. Made by OD Privacy Lab "
        "(odcore.privacy.design, odcore.privacy.accounting).</p>",
    ]
    return _page("Guarantee sheet", "".join(body))


def budget_sheet(b: dict, *, mode_words: str = "per person") -> str:
    """The guarantee sheet of a user-level release from its budget (``budget`` with ``max_pairs``)."""
    m, tau, w = b["max_pairs"], b["threshold"], b["weeks"]
    body = [
        "<h1>Guarantee sheet: weekly origin–destination counts</h1>",
        "<h2>Who is protected</h2>",
        f"<p><b>One person, all of their trips, every week</b> ({html.escape(mode_words)}). Each person counts in at "
        f"most <b>{m}</b> pairs per week; every count gets Laplace noise of scale {_num(b['noise_scale_bounded'])}; "
        f"a pair is published only if its noisy count reaches <b>{_num(tau)}</b>.</p>",
        "<h2>The guarantee (ε, δ) per person</h2>",
        _guarantee_rows(b["epsilon_user_week_bounded_tight"], b["delta_user_week_bounded_tight"],
                        b["epsilon_user_total_bounded_tight"], b["delta_user_total_bounded_tight"], w),
        f"<p>δ includes the chance that the threshold lets through a pair only this person made "
        f"({_num(b['delta_partition_week_bounded'])} per week). A threshold of "
        f"{_num(b['threshold_for_delta_week_bounded'])} would keep that chance under {_num(b['delta'])} per week.</p>",
        "<h2>What an attacker can learn</h2>",
        f"<p>After one week an attacker's belief that a person is in the data can move from 50 % to at most "
        f"<b>{_pct(b['posterior_bound_user_week_bounded'])}</b>; after {w} weeks to at most "
        f"<b>{_pct(b['posterior_bound_user_total_bounded'])}</b> (δ aside).</p>",
        "<h2>Reproduce</h2>",
        f"<p class='note'><code>python -m odcore budget --mode user_level --epsilon {b['epsilon']!r} --max-pairs {m} "
        f"--threshold {tau} --weeks {w} --delta {b['delta']!r}</code></p>",
    ]
    return _page("Guarantee sheet", "".join(body))
