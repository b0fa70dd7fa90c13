"""Play the attacker: guess whether a real person of the week is in the release, against the optimal attacker."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import streamlit as st

from odapp.attack import cache as attack_cache
from odapp.live import view as live_view
from odapp.shared import ahead, callbacks, charts, guide, page_work, projector
from odapp.shared.errors import engine_errors
from odapp.shared.export import chart
from odapp.shared.layout import metric, needs_pairs, page
from odapp.shared.styling import projector_mode
from odapp.shared.words import pct, plain, probability_words
from odcore.privacy.attack import wilson_interval
from odcore.report.teaching import (
    LADDER,
    LADDER_CHOICES,
    THEORY_ROUNDS,
    binomial_interval,
    class_code,
    deal,
    game_level,
    settings_fingerprint,
)

GAME = "teach.game"            # session_state: {"key": identity of the game, "history": [one dict per round]}
CHOICE_LABELS = ["Climb: 1 → 3 → 10 → 32", "k = 1", "k = 3", "k = 10", "k = 32"]

ctx = page(
    "Play the attacker",
    "You are the attacker. The lab picks a real person of this week and tosses a hidden coin: **in** the release "
    "or **out**. You know everyone else's trips, so you know how many *other* people are on each of this "
    "person's trips; you see what the release published there. Were they in? The lab's optimal attacker plays "
    "the same rounds.",
    icon="🕵️", live=("epsilon", "threshold"),
)
needs_pairs(ctx, "The attacker game (it draws people and their pairs)")
guide.panel(__file__, ctx)
s = ctx.settings
rcfg = s.release_config()
with engine_errors("Could not prepare the week's people", "Pick another week or data source in the sidebar."):
    pool, rules = callbacks.game_pool(ctx)   # the same the In/Out callback deals from
fingerprint = settings_fingerprint(s.epsilon, s.threshold, rcfg.sensitivity, s.week, pool.users.size,
                                   pool.others.size)
ss = st.session_state
ss.setdefault("game_seed", int(s.seed) % 2 ** 20)
ss.setdefault("game_choice", 0)
ss.setdefault("game_per_level", 5)
# Projector mode hides the seed and rounds-per-level inputs, and Streamlit drops a widget's value at the end of a
# run that does not draw it: the next run then started a new game (the sidebar seed's, 5 rounds per level) while a
# class played the projected one. Set again on every run, they keep their values while hidden.
for _k in ("game_seed", "game_per_level"):
    ss[_k] = ss[_k]


top = st.columns([2, 1, 1, 1]) if not projector.on() else st.columns([2, 1])
choice = top[0].selectbox("Known trips", range(len(CHOICE_LABELS)), format_func=CHOICE_LABELS.__getitem__,
                          key="game_choice",
                          help="How many of the person's unique trips the attacker knows. 'Climb' starts at k = 1 "
                               "and moves up every few rounds (Houssiau et al. quote k = 3 and k = 32).")
if not projector.on():
    top[1].number_input("Game seed", 0, 2 ** 20 - 1, step=1, key="game_seed",
                        help="Same seed, same rounds (people, coins and noise). A class code carries it.")
    top[2].number_input("Rounds per level", 1, 50, key="game_per_level",
                        help="When climbing: rounds at each k before the next.")
per_level = int(ss["game_per_level"])
ladder = LADDER_CHOICES[int(choice)]
game_seed = int(ss["game_seed"])
key = (s.dataset.id, s.week, rcfg, s.seed, game_seed, int(choice), per_level)
if ss.get(GAME, {}).get("key") != key:
    if GAME in ss:                       # the settings changed: a new game, and an old join message is stale
        ss["game_join_error"] = None
    ss[GAME] = {"key": key, "history": []}
history: list[dict] = ss[GAME]["history"]
if top[-1].button("New game", key="game_new", help="Forget the score and start again at round 1 (same seed, "
                                                    "same rounds)."):
    history.clear()

with st.expander("Class mode: everyone plays the same rounds", expanded=bool(ss.get("game_class_open"))):
    code = class_code(game_seed, int(choice), fingerprint)
    st.markdown(f"Code for this game: <span style='font-size:2.6rem;font-weight:700;letter-spacing:0.15em'>"
                f"{code}</span>", unsafe_allow_html=True)
    st.caption("Students: open this page with the same sidebar settings, enter the code, press Join.")
    j1, j2 = st.columns([2, 1])
    j1.text_input("Join with a code", key="game_join_code", placeholder="e.g. " + code,
                  help="The 7-character code on the teacher's screen (dash optional).")
    j2.button("Join", key="game_join", on_click=callbacks.game_join, args=(fingerprint,),
              help="Play the rounds of that code.")
    if ss.get("game_join_error"):
        st.error(f"**Could not join** — {plain(ss['game_join_error'])}", icon="⚠️")

n_played = len(history)
k, j = game_level(n_played, ladder, per_level)
with engine_errors("Could not deal the round", "Pick a smaller number of known trips."):
    rnd = deal(pool, rules, k, j, game_seed)


# ---- the last round's reveal -------------------------------------------------------------------------------------
if history:
    last = history[-1]
    prev = deal(pool, rules, last["k"], last["j"], game_seed)
    right = last["guess"] == last["member"]
    st.subheader(f"Round {last['round']}: the person was **{'IN' if last['member'] else 'OUT'}**")
    verdict = "in" if last["optimal"] else "out"
    ex = prev.explanation()
    n_pub = int((ex["state"] == "released").sum())
    why = (f"Its evidence, the log-likelihood ratio, adds one term per pair: {n_pub} of {prev.k} pairs were "
           f"published (each between −{rules.epsilon_pair:.3g} and +{rules.epsilon_pair:.3g}: above the others' "
           f"count + 1 points to *in*, at or below it to *out*), {prev.k - n_pub} suppressed (each slightly "
           f"towards *out*: a pair is suppressed a little more often without the person). Total "
           f"**{last['llr']:+.3f}**" + (", an exact tie: it tossed a coin." if prev.tie else
                                        f" {'>' if last['llr'] > 0 else '<'} 0, so *{verdict}*."))
    cols = st.columns([1, 2])
    with cols[0]:
        (st.success if right else st.warning)(
            f"You said **{'in' if last['guess'] else 'out'}**: {'right' if right else 'wrong'}.",
            icon=":material/check_circle:" if right else ":material/cancel:")
        st.markdown(f"The optimal attacker said **{verdict}** "
                    f"({'right' if last['optimal'] == last['member'] else 'wrong'}). "
                    f"On this person and {'this pair' if prev.k == 1 else f'these {prev.k} pairs'} it is right {pct(last['exact_success'])} of the time "
                    f"({probability_words(last['exact_success'])}).")
        st.caption(why)
    with cols[1]:
        fig = charts.llr_chart(ex, int(prev.k), projector=projector_mode())
        chart(fig, "llr_last_round", data=ex, key="game_llr")

# ---- the current round -----------------------------------------------------------------------------------------
st.subheader(f"Round {n_played + 1} · the attacker knows k = {k} of person {plain(rnd.user)}'s unique trips")
shown = rnd.shown()
n_sup = int((shown["state"] == "suppressed").sum())
st.markdown(f"What the release shows on {'this pair' if k == 1 else f'these {k} pairs'}: **{k - n_sup} published, {n_sup} suppressed** "
            f"(threshold {s.threshold:g}; each count has noise of scale {rules.scale:.3g}). "
            "If the person is in, each count is one higher than the others alone.")
# a suppressed pair's count is "—", not the grid's "None" for a missing number
shown = shown.assign(published=[f"{v:,.2f}" if np.isfinite(v) else "—" for v in shown["published"].to_numpy(float)])
st.dataframe(shown, hide_index=True, width="stretch", key="game_shown", height=min(38 + 35 * k, 420),
             column_config={
                 "pair": st.column_config.NumberColumn("pair", help="Known trip number"),
                 "origin": st.column_config.NumberColumn("from zone", format="%d"),
                 "destination": st.column_config.NumberColumn("to zone", format="%d"),
                 "others": st.column_config.NumberColumn("others on it (known)", format="%d",
                                                         help="People other than this person on the pair"),
                 "published": st.column_config.TextColumn("published count", help="— when suppressed", alignment="right"),
                 "state": st.column_config.TextColumn("published?")})
b = st.columns([1, 1, 3])
round_args = (ctx, GAME, k, j, game_seed)   # the callback deals this round again from the cached pool
b[0].button("In", key="game_in", type="primary", on_click=callbacks.game_answer, args=(*round_args, True), width="stretch",
            help="Guess that this person is in this week's release.")
b[1].button("Out", key="game_out", on_click=callbacks.game_answer, args=(*round_args, False), width="stretch",
            help="Guess that this person is not in this week's release.")
st.caption("How the noise treats these pairs, at any ε and threshold: drag them below. Letting go sets them for the "
           "page, which starts a new game (the rounds depend on the release).")
live_view.game(s, rnd.others, int(rules.sensitivity))

# ---- the score -------------------------------------------------------------------------------------------------
st.subheader("Score")
if not history:
    st.caption("No rounds played yet.")
hist = pd.DataFrame(history, columns=["round", "k", "j", "user", "guess", "member", "optimal", "llr",
                                      "exact_success"])
n = len(hist)
you = int((hist["guess"] == hist["member"]).sum())
opt = int((hist["optimal"] == hist["member"]).sum())
theory = float(hist["exact_success"].mean()) if n else float("nan")
c = st.columns(3)
metric(c[0], "Your score", f"{you}/{n}" + (f" ({pct(you / n, 0)})" if n else ""), None,
       help="Rounds you got right.")
metric(c[1], "Optimal attacker", f"{opt}/{n}" + (f" ({pct(opt / n, 0)})" if n else ""), None,
       help="The likelihood-ratio test on the same rounds (odcore.privacy.attack.pair_llr summed).")
if n:
    lo, hi = binomial_interval(theory, n)
    metric(c[2], "Theory for these rounds", pct(theory),
           f"the optimal attacker's expected score; 99 % of games of {n} rounds land in {pct(lo, 0)}–{pct(hi, 0)}",
           help="Mean over the rounds played of the optimal attacker's exact success on each "
                "(odcore.privacy.attack.user_risk against the thresholded release).")

work = functools.partial(page_work.game_theory, ladder=tuple(ladder), game_seed=game_seed, rounds=THEORY_ROUNDS)
theory_k = {}
with engine_errors("Could not compute the game's theory"):
    theory_k = work(ctx)
ks = list(theory_k)
kmax = max(max(LADDER), *ks)
no_threshold = attack_cache.success_curve(rules.epsilon_pair, kmax, 0.5)["success"].to_numpy()
sc = None
if n:
    rows = []
    for kk, g in hist.groupby("k"):
        for who, col in (("you", "guess"), ("optimal attacker", "optimal")):
            w = int((g[col] == g["member"]).sum())
            lo_w, hi_w = wilson_interval(w, len(g))
            rows.append({"k": kk, "who": who, "rounds": len(g), "success": w / len(g), "ci_low": float(lo_w),
                         "ci_high": float(hi_w)})
    sc = pd.DataFrame(rows)
fig = charts.game_score_chart(no_threshold, theory_k, sc, THEORY_ROUNDS, projector=projector_mode())
curve = pd.DataFrame({"k": np.arange(kmax + 1), "p_k_no_threshold": no_threshold,
                      "game_theory": [theory_k.get(kk, np.nan) for kk in range(kmax + 1)]})
chart(fig, "play_the_attacker_score", data=curve, key="game_score")
st.caption("Why the game's theory is below p_k: most of a person's pairs carry few people and are suppressed in both "
           "cases, and a suppressed pair tells the attacker almost nothing. The dashed curve is what the attacker "
           "would reach if every pair were published."
           + ("" if projector_mode() else " Rounds: `odcore.report.teaching.deal`; verdict: "
              "`odcore.privacy.attack.pair_llr`; theory: `odcore.privacy.attack.user_risk` per round."))
# the next grid step or seed, while the person reads this one: the week's people and the theory of this game
ahead.after(ctx, work)
