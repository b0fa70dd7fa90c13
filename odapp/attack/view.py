"""The Attack page's "real person of the week" section, a fragment (its person, id and population controls rerun
only it).

It lives here, not in the page script: a session keeps its fragment after the run (and for two minutes after it
closes), and a function defined in a page script would keep all of that page's variables with it. This one takes
only the context and the bound, and fetches the week's pairs and risks from the caches.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import streamlit as st

from odapp.attack import cache as attack_cache
from odapp.facts import view as facts_view
from odapp.live import view as live_view
from odapp.shared import charts
from odapp.shared.cli_config import user_risk_config
from odapp.shared.errors import engine_errors
from odapp.shared.export import button_row, chart, export_buttons
from odapp.shared.layout import metric
from odapp.shared.styling import projector_mode
from odapp.shared.words import num, pct, plain, probability_words

K_MAX = 70   # the page's curve: k = 0..70 (Houssiau et al. 2022, Fig. 1)


TYPICAL = "typical (median trips)"
PICKS = {TYPICAL: 0.5, "busiest": 1.0, "quiet (10th percentile)": 0.1}   # quantile of unique trips


def choose_user(per_user, pick: str, uid_text: str | None, typical=None):
    """The user the page attacks (``per_user``: unique pairs of each user of the week): the one at the quantile of
    ``pick`` (:data:`PICKS`), or for "by id" the one whose id is ``uid_text`` (None when no user has it). The
    typical person is every page's (``typical``: :mod:`odcore.report.facts`' ``typical_user``) when given."""
    if pick == TYPICAL and typical is not None and typical in per_user.index:
        return typical
    if pick == "by id":
        match = [u for u in per_user.index[:200_000] if str(u) == str(uid_text).strip()]
        return match[0] if match else None
    ks = per_user.to_numpy()
    target = np.quantile(ks, PICKS[pick], method="nearest")
    return per_user.index[int(np.flatnonzero(ks == target)[0])]


def person_risk(ctx, rcfg, key, user, pairs, counts):
    """``(others_key, user_risk, roc_plain, plain_k)`` of ``user``: the counts of their pairs without them, their
    risk and ROC (:func:`odapp.attack.cache.user_risk`) and p_k at their number of pairs for the release's own per-pair
    noise (1/scale: ε per count, or ε/max_pairs in the per-user mode; to K_MAX at least: the page's own curve at a
    50/50 prior, per metric, is then this same cache entry)."""
    s = ctx.settings
    others = attack_cache.attack_others(s.dataset.id, ctx.od_config, s.week, key, user, _pairs=pairs, _counts=counts)
    eps_pair = 1.0 / rcfg.scale
    others_key = tuple(np.sort(others).tolist())
    ur, roc_plain = attack_cache.user_risk(others_key, eps_pair, float(rcfg.threshold))
    k_user = len(others)
    plain_k = float(attack_cache.success_curve(eps_pair, max(k_user, K_MAX), 0.5)["success"][k_user]) if k_user else 0.5
    return others_key, ur, roc_plain, plain_k


def person_tables(ctx, pick: str, uid_text: str | None, fit: bool) -> None:
    """Compute into the caches what :func:`real_person` shows for ``ctx`` with the person picked by ``pick`` and
    ``uid_text`` and ``fit`` (:func:`odapp.live.view.fitted`): for the next grid step or seed, computed ahead."""
    s = ctx.settings
    rcfg = s.release_config()
    pairs, counts = attack_cache.attack_pairs(s.dataset.id, ctx.od_config, s.week, rcfg, s.seed, _od=ctx.od)
    if pairs.empty:
        return
    key = attack_cache.pairs_key(rcfg, s.seed)
    per_user = attack_cache.attack_users(s.dataset.id, ctx.od_config, s.week, key, _pairs=pairs)
    user = choose_user(per_user, pick, uid_text if uid_text is not None else str(per_user.index[0]),
                       _typical_user(ctx))
    if user is not None:
        others_key = person_risk(ctx, rcfg, key, user, pairs, counts)[0]
        live_view.person_table(s, others_key, fit)


def _typical_user(ctx):
    """The typical person of the guarantee card (:func:`odapp.facts.view.of`), or None."""
    f = facts_view.of(ctx).get("typical_user")
    return None if f is None else f.value


@st.fragment
def real_person(ctx, bound: float) -> None:
    """One real person of the week and the whole week's population: its controls (person, id, population) rerun
    only this part of the page (st.fragment); a sidebar change reruns the page and this with it. ``bound``: the
    per-trip bound e^ε/(1+e^ε) the page shows, drawn on the population's histogram."""
    s = ctx.settings
    st.subheader(f"A real person of week {s.week}, in the thresholded release")
    st.markdown("In the real release, pairs with few people are usually suppressed, and a suppressed pair says little. "
                "So a person's **effective k** — the k of the curve above with the same success — is often far "
                "below their number of trips.")
    unit_note = st.empty()   # in both units, so the charts below keep their place (updated, not rebuilt)
    if s.mode == "user_level":
        unit_note.caption(f"Per-user mode: each person keeps at most {s.max_pairs} pairs and every count gets noise "
                          f"of scale {s.max_pairs}/ε, so each pair carries ε/{s.max_pairs} = "
                          f"{s.epsilon / s.max_pairs:.3g}.")
    rcfg = s.release_config()
    with engine_errors("Could not prepare the week for the attack"):
        pairs, counts = attack_cache.attack_pairs(s.dataset.id, ctx.od_config, s.week, rcfg, s.seed, _od=ctx.od)
    if pairs.empty:
        st.info("No trips this week: pick another week in the sidebar.")
        st.stop()
    key = attack_cache.pairs_key(rcfg, s.seed)   # the rows do not change with ε or the threshold
    per_user = attack_cache.attack_users(s.dataset.id, ctx.od_config, s.week, key, _pairs=pairs)
    pick = st.radio("Person", [*PICKS, "by id"], horizontal=True, key="attack_pick",
                    help="Which user of the week to attack: picked by their number of unique trips, or by id.")
    uid_text = None
    if pick == "by id":
        uid_text = st.text_input("User id", value=str(per_user.index[0]), key="attack_uid",
                                 help="The pseudonymous id as in the data (see the Data page's CSV).")
    user = choose_user(per_user, pick, uid_text, _typical_user(ctx))
    if user is None:
        st.error(f"No user with id {plain(repr(uid_text))} has trips in week {s.week}; try another id or a quick "
                 "pick.")
        st.stop()
    with engine_errors("Could not attack this user"):
        others_key, ur, roc_plain, plain_k = person_risk(ctx, rcfg, key, user, pairs, counts)
    k_user = len(others_key)
    eps_pair = 1.0 / rcfg.scale
    c = st.columns(4)
    metric(c[0], "User", plain(user), f"{k_user} unique trips this week")
    metric(c[1], "Effective k after suppression", num(round(ur.effective_k, 1)),
           f"{ur.k_informative} of {k_user} pairs carry any signal",
           help="The k of the plain curve with the same success.")
    metric(c[2], "Attack success on this user", pct(ur.success), probability_words(ur.success),
           help=f"Exact (within {ur.error_bound:.0e}): ½ + ½·TV of what the release shows with and without them.")
    metric(c[3], "Without suppression", pct(plain_k) if np.isfinite(plain_k) else "–",
           "if every pair were published" if np.isfinite(plain_k) else None,
           help="p_k at this user's k for the release's per-pair noise (the curve above in per-metric mode).")
    with engine_errors("Could not tabulate this user's success against ε"):
        live_view.person(s, others_key, str(user), live_view.fitted(s))   # follows the page's live ε slider
    left, right = st.columns(2)
    with left:   # drawn on the canvas; the plotly figure only for the files, when a button asks
        live_view.roc(ur, roc_plain, str(user))
        row = button_row()   # there in both modes, so what follows keeps its place (updated, not rebuilt)
        if not projector_mode():
            export_buttons(f"roc_user_{user}",
                           fig=functools.partial(charts.roc_chart, others_key, eps_pair, float(rcfg.threshold),
                                                 str(user), projector=False),
                           data=pd.DataFrame({"fpr": ur.roc.fpr, "tpr": ur.roc.tpr}),
                           config=user_risk_config(s, ctx.loaded, user=str(user)), command="user-risk",
                           key="roc_user", row=row)

    # ---- the population ---------------------------------------------------------------------------------------------
    with right:
        st.markdown(f"**Everyone in week {s.week}**")
        pop = st.toggle("Attack every user of the week", value=False, key="attack_population",
                        help="Exact success for each user (a few seconds for 25,000 users; cached per setting).")
        if pop:
            with engine_errors("Could not attack the population"):
                risk, _report, summary = attack_cache.week_risk(s.dataset.id, ctx.od_config, s.week, rcfg, s.seed,
                                                        _pairs=pairs, _counts=counts)
            fig = charts.population_chart(risk["success"].to_numpy(), bound, float(ur.success), str(user),
                                          projector=projector_mode())
            chart(fig, f"population_risk_week{s.week}", data=risk.astype({"user": str}),
                  config=user_risk_config(s, ctx.loaded), command="user-risk", key="pop_risk")
            share = summary["share_above"]
            st.markdown(
                f"Median success **{pct(summary['quantiles']['median'])}** "
                f"({probability_words(summary['quantiles']['median'])}); "
                f"{pct(float(np.mean(risk['success'] > bound)))} of users are above the per-trip "
                f"bound, {pct(share['0.9'])} above 90 %. Median effective k {summary['median_effective_k']:.1f} "
                f"for a median of {summary['median_k']:.0f} unique trips.")
        else:
            st.caption("Switch on to compute the attack's success for every user of the week"
                       + ("." if projector_mode() else " (`odcore.privacy.attack.week_risk`)."))
