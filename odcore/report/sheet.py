"""A one-page guarantee sheet for a release: self-contained, printable HTML with the numbers in plain words.

:func:`guarantee_sheet` reads a designer report (:func:`odcore.privacy.design.design_report`) and
:func:`budget_sheet` the ``budget`` figures of a user-level release (:func:`odcore.privacy.accounting.budget` with
``max_pairs``); both return one HTML string with inline CSS (no scripts, no external files), laid out for A4/Letter.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import html
import math
import subprocess

import pandas as pd

from odcore import __version__
from odcore.numbers import number_text, percent_text
from odcore.paths import REPO_ROOT
from odcore.privacy.accounting import DELTA_NO_GUARANTEE, loss_exceeds_probability
from odcore.privacy.design import verdict_rows

__all__ = ["SEED_WORDS", "budget_sheet", "data_fingerprint", "guarantee_sheet", "number_text", "percent_text",
           "posterior_with_delta", "release_record", "software_version"]

SEED_WORDS = "secret: the noise seed is not written anywhere a published file can carry it"

_CSS = """
body{font-family:Georgia,'DejaVu Serif',serif;max-width:46em;margin:2em auto;color:#1b1f24;line-height:1.45}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.1em;margin:1.2em 0 .3em;border-bottom:1px solid #ccd}
table{border-collapse:collapse;width:100%;margin:.4em 0}td,th{border:1px solid #ccd;padding:.3em .5em;text-align:left}
th{background:#f2f4f7}.big{font-size:1.15em;font-weight:bold}.note{color:#555;font-size:.9em}
@media print{body{margin:0;max-width:none;font-size:11pt}h2{break-after:avoid}table{break-inside:avoid}}
"""


_num = number_text
_pct = percent_text


def data_fingerprint(frame) -> str:
    """SHA-256 of a table's content (column names, dtypes and every value, row order included): the same data gives
    the same fingerprint on any machine, one changed value gives another (``pandas.util.hash_pandas_object``)."""
    h = hashlib.sha256()
    h.update(repr([(str(c), str(t)) for c, t in frame.dtypes.items()]).encode())
    h.update(len(frame).to_bytes(8, "little"))
    if len(frame):
        h.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    return h.hexdigest()


def software_version() -> dict:
    """``{"odcore": version, "commit": git commit of the code or None}``."""
    commit = None
    try:
        r = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                           timeout=5, check=False)
        if r.returncode == 0:
            commit = r.stdout.strip() or None
            d = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5, check=False)
            if d.returncode == 0 and d.stdout.strip():
                commit += " (with local changes)"
    except (OSError, subprocess.SubprocessError):
        pass
    return {"odcore": __version__, "commit": commit}


def release_record(*, dataset: str, fingerprint: str, rows: int | None, users: int | None, week_starts,
                   weeks_covered, zones: str, settings: dict) -> dict:
    """What a guarantee sheet and a published release carry so that anyone can tell later which release they
    describe: the data (label, content fingerprint, rows, users, weeks covered), the zone system, every setting
    except the noise seed (:data:`SEED_WORDS`), the software and the time written (UTC)."""
    starts = [str(w) for w in week_starts]
    cov = sorted(int(w) for w in weeks_covered)
    return {
        "dataset": str(dataset), "fingerprint": f"sha256:{fingerprint}", "rows": rows, "users": users,
        "weeks_covered": [{"week": w, "start": starts[w] if w < len(starts) else None} for w in cov],
        "zones": str(zones),
        "settings": {k: v for k, v in settings.items() if k != "seed" and v is not None},
        "seed": SEED_WORDS,
        "software": software_version(),
        "written": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def _weeks_text(weeks: list) -> str:
    return (", ".join(f"{w['week']} (from {w['start']})" if w.get("start") else str(w["week"]) for w in weeks[:6])
            + (f", … ({len(weeks)} weeks)" if len(weeks) > 6 else ""))


def _record_html(rec: dict | None) -> str:
    """The record's table: a public record (:func:`odcore.report.published.public_record`: weeks published, zones,
    public settings, the assumed trips) or the data holder's (:func:`release_record`,
    :func:`odcore.report.published.private_record`: dataset, fingerprint, rows and people too)."""
    if not rec:
        return ("<p class='note'>Not tied to a dataset: these are the guarantees of the settings alone (no data "
                "fingerprint).</p>")
    e = html.escape
    sw = rec.get("software") or {}
    settings = ", ".join(f"{k} = {v}" for k, v in (rec.get("settings") or {}).items())
    rows = [("Dataset", rec.get("dataset"))]
    if "fingerprint" in rec:
        rows += [("Fingerprint (content hash)", rec.get("fingerprint")),
                 ("Rows, people", f"{_num(rec.get('rows'))} rows, {_num(rec.get('users'))} people")]
    if "weeks_published" in rec:
        rows.append(("Weeks published", _weeks_text(rec["weeks_published"]) or "none"))
    else:
        rows.append(("Weeks covered", _weeks_text(rec.get("weeks_covered") or []) or "–"))
    rows += [("Zone system", rec.get("zones")), ("Settings", settings)]
    trips = (rec.get("assumptions") or {}).get("trips")
    if trips is not None:
        rows.append(("Assumed trips of a person", f"{trips} unique trips a week: "
                                                  f"{rec['assumptions'].get('trips_means', '')}"))
    rows += [("Noise seed", rec.get("seed")),
             ("Software", f"odcore {sw.get('odcore')}, commit {sw.get('commit') or 'unknown'}"),
             ("Written (UTC)", rec.get("written"))]
    return ("<h2>Record</h2><table>" + "".join(f"<tr><th>{e(k)}</th><td>{e(str(v))}</td></tr>" for k, v in rows)
            + "</table>")


def posterior_with_delta(epsilon, delta) -> float:
    """Largest success of any attacker guessing whether a person is in the data (a coin flip is 50 %) under
    (ε, δ)-DP: ``(e^ε + δ)/(1 + e^ε)``, the corner of the (ε, δ) trade-off region (Kairouz, Oh & Viswanath 2015,
    Thm 2.1: TPR <= e^ε·FPR + δ both ways); without δ it is the familiar ``e^ε/(1 + e^ε)``.

    >>> round(posterior_with_delta(0.66, 0.0), 4), round(posterior_with_delta(0.66, 0.1), 4)
    (0.6593, 0.6933)
    """
    if epsilon is None or not math.isfinite(epsilon):
        return 1.0
    e = min(float(epsilon), 700.0)
    return min(1.0, (math.exp(e) + float(delta or 0.0)) / (1.0 + math.exp(e)))


def _delta_words(eps_week, d_week, m, epsilon, threshold_part=None) -> str:
    """What δ means, and the chance the person's privacy loss exceeds ε (exact PLD) where it can be computed."""
    out = ("<p><b>What δ means.</b> (ε, δ) says: whatever an observer looks for, it is at most e<sup>ε</sup> times "
           "more likely with the person in the data than without, <i>plus</i> δ. δ is <b>not</b> the chance that "
           "the guarantee fails: the chance that the person's privacy loss exceeds ε is larger")
    if m is not None and eps_week is not None and epsilon and m <= 400:
        p = loss_exceeds_probability(float(eps_week), int(m), float(epsilon) / int(m))
        ratio = p / d_week if d_week else float("nan")
        out += (f"; here it is {_num(p)} for one week (the exact privacy-loss distribution of the {m} noisy counts a "
                f"person can change{f', {ratio:,.0f} times δ' if math.isfinite(ratio) and ratio >= 1 else ''})")
    out += ". Beyond ε the loss grows gradually, except for the threshold part of δ"
    if threshold_part is not None:
        out += (f" ({_num(threshold_part)}): the chance that a pair only this person makes is published, which "
                "would show their trip outright")
    return out + ".</p>"


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_CSS}</style></head><body>{body}</body></html>")


def _guarantee_rows(eps_week, d_week, eps_total, d_total, weeks) -> str:
    def flag(d):
        return " — <b>no meaningful guarantee</b>" if d is not None and d > DELTA_NO_GUARANTEE else ""

    return (f"<table><tr><th></th><th>ε</th><th>δ (every part included)</th></tr>"
            f"<tr><td>one week</td><td class='big'>{_num(eps_week)}</td><td>{_num(d_week)}{flag(d_week)}</td></tr>"
            f"<tr><td>{weeks} weeks</td><td class='big'>{_num(eps_total)}</td><td>{_num(d_total)}{flag(d_total)}"
            f"</td></tr></table>")


def _verdict_part(r: dict) -> list[str]:
    """The designer's verdict: the same rows as the designer page (:func:`odcore.privacy.design.verdict_rows`)."""
    if "verdict" not in r:
        return []
    e = html.escape
    v = r["verdict"]
    out = ["<h2>Verdict</h2>", f"<p class='big'>{e(v['headline'])}</p>"]
    if r.get("would_change"):
        out.append("<p>What would change it:</p><ul>" + "".join(f"<li>{e(c['words'])}</li>" for c in r["would_change"])
                   + "</ul>")
    out.append("<table>" + "".join(f"<tr><td>{e(k)}</td><td>{e(val)}</td></tr>" for k, val in verdict_rows(r))
               + "</table>")
    out.append("<p class='note'>Expected figures: exact means over the noise given one seeded contribution "
               "bounding, computed on the true data (not for publication). Risk figures: upper bounds from the exact "
               "trade-off curve of the release (odcore.privacy.risk).</p>")
    return out


def _delta_parts_html(dp: dict | None) -> str:
    if not dp:
        return ""
    how = ("fitted: the smallest whole threshold whose part is at most half of δ" if dp.get("threshold_fitted")
           else "set, not fitted")
    warn = "".join(f"<p class='big'>⚠ {html.escape(w)}</p>" for w in dp.get("warnings") or [])
    return (f"<p class='note'>δ over {dp['weeks']} weeks: asked {_num(dp['delta_asked'])} = Laplace part "
            f"{_num(dp['delta_laplace'])} (the δ at which ε is given) + threshold part "
            f"{_num(dp['delta_threshold_cost'])} (−log(1 − {_num(dp['delta_partition'])}), the chance that a pair only "
            f"this person makes is published; threshold {_num(dp['threshold'])}, {how}) = "
            f"<b>{_num(dp['delta_total'])}</b>.</p>{warn}")


DESIGN_SHEET_NOTICE = ("DO NOT SHARE: this sheet is computed on the true data (its typical and busiest person, "
                       "the expected error and the verdict), which the release's guarantee does not protect. Share "
                       "the release's public guarantee sheet instead.")


def guarantee_sheet(report: dict, *, record: dict | None = None, notice: str | None = DESIGN_SHEET_NOTICE) -> str:
    """The guarantee sheet of a designed release (the dict of :func:`odcore.privacy.design.design_report`), with
    its record (:func:`release_record`) when given; ``notice`` heads the page (by default, that the sheet holds
    figures of the true data and is not to be shared)."""
    r = report
    g = r["goal"]
    m, tau, scale, w = r["max_pairs"], r["threshold"], r["noise_scale"], r["weeks"]
    e = html.escape
    body = [
        "<h1>Guarantee sheet: weekly origin–destination counts</h1>",
        *([f"<p class='big'>⚠ {e(notice)}</p>"] if notice else []),
        f"<p class='note'>Goal asked for: {e(g['words'])} — {'met' if r['goal_met'] else 'NOT met'}.</p>",
        _record_html(record),
        *_verdict_part(r),
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
        f"person in the data than without, plus δ. These are the exact (tight) values of the privacy-loss "
        f"distribution.</p>",
        _delta_words(r["epsilon_user_week"], r["delta_user_week"], m, r.get("epsilon"), r.get("delta_partition_week")),
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
            f"ε = {_num(goog['epsilon_user_week_max'])}, tight at δ = {_num(r['goal']['delta'] / 2)} for the noise "
            "(half of this design's δ; the app's guarantee card gives ε at δ = 10⁻⁶, slightly less).</p>")
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


def budget_sheet(b: dict, *, mode_words: str = "per person", record: dict | None = None,
                 delta_parts: dict | None = None, trips_words: str = "the typical person of the data; busier people are less protected",
                 notice: str | None = None) -> str:
    """The guarantee sheet of a release from its budget (:func:`odcore.privacy.accounting.budget`): per person when
    ``b`` holds the user-level figures (``max_pairs``), else for a person of ``b["trips"]`` unique trips a week under
    the per-metric release; with the release's record (:func:`release_record`) and δ split
    (:meth:`odcore.privacy.accounting.DeltaParts.to_dict`) when given. ``trips_words`` says where the per-count
    figures' ``b["trips"]`` comes from; ``notice`` (e.g. a do-not-share line) heads the page."""
    user = b.get("epsilon_user_week_bounded_tight") is not None or b.get("max_pairs") is not None
    tau, w = b["threshold"], b["weeks"]
    e = html.escape
    if user:
        m = b["max_pairs"]
        ew, dw = b["epsilon_user_week_bounded_tight"], b["delta_user_week_bounded_tight"]
        et, dt = b["epsilon_user_total_bounded_tight"], b["delta_user_total_bounded_tight"]
        who = (f"<p><b>One person, all of their trips, every week</b> ({e(mode_words)}). Each person counts in at "
               f"most <b>{m}</b> pairs per week; every count gets Laplace noise of scale "
               f"{_num(b['noise_scale_bounded'])}; a pair is published only if its noisy count reaches "
               f"<b>{_num(tau)}</b>.</p>")
        part_week = b["delta_partition_week_bounded"]
        fit_week = math.ceil(b["threshold_for_delta_week_bounded"] - 1e-9)
        thr = (f"<p>δ includes the chance that the threshold lets through a pair only this person makes "
               f"({_num(part_week)} per week). "
               + (f"A threshold of {fit_week:,} would keep that chance under {_num(b['delta'])} per week.</p>"
                  if fit_week > tau else f"The threshold {_num(tau)} keeps it under {_num(b['delta'])} per week."
                                         "</p>"))
        k, eps = m, b["epsilon"]
        cmd = (f"python -m odcore budget --mode user_level --epsilon {b['epsilon']!r} --max-pairs {m} "
               f"--threshold {tau} --weeks {w} --delta {(delta_parts or {}).get('delta_asked', 2 * b['delta'])!r}")
    else:
        n = b["trips"]
        ew, dw = b["epsilon_user_week_tight"], b["delta_user_week_tight"]
        et, dt = b["epsilon_user_total_tight"], b["delta_user_total_tight"]
        who = (f"<p><b>One trip count</b> (per metric): each count of distinct people on a pair in a week gets "
               f"Laplace noise of scale {_num(1 / b['epsilon'])} and is published only if its noisy count reaches "
               f"<b>{_num(tau)}</b>. A person's week is not bounded: the figures below are for a person with "
               f"<b>{n}</b> unique trips a week ({e(trips_words)}).</p>")
        thr, k, eps = "", n, b["epsilon"] * n
        cmd = (f"python -m odcore budget --epsilon {b['epsilon']!r} --threshold {tau} --trips {n} --weeks {w} "
               f"--delta {(delta_parts or {}).get('delta_asked', b['delta'])!r}")
    pw, pt = posterior_with_delta(ew, dw), posterior_with_delta(et, dt)
    body = [
        *([f"<p class='big'>⚠ {e(notice)}</p>"] if notice else []),
        "<h1>Guarantee sheet: weekly origin–destination counts</h1>",
        _record_html(record),
        "<h2>Who is protected</h2>", who,
        "<h2>The guarantee (ε, δ) per person</h2>",
        _guarantee_rows(ew, dw, et, dt, w),
        _delta_parts_html(delta_parts),
        thr,
        _delta_words(ew, dw, k if user or k <= 400 else None, eps,
                     b.get("delta_partition_week_bounded") if user else None),
        "<h2>What an attacker can learn</h2>",
        f"<p>An attacker guessing whether a person is in the data (a coin flip is 50 %) is right at most "
        f"<b>{percent_text(pw)}</b> of the time after one week and <b>{percent_text(pt)}</b> after {w} weeks: "
        f"(e<sup>ε</sup> + δ)/(1 + e<sup>ε</sup>), δ included.</p>",
        "<h2>Reproduce</h2>",
        f"<p class='note'><code>{e(cmd)}</code></p>",
    ]
    return _page("Guarantee sheet", "".join(body))
