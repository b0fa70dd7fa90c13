"""OD Privacy Lab: the landing page ("Home" in the navigation, at the app's address; ``app.py`` runs it)."""

from __future__ import annotations

import streamlit as st
from streamlit.errors import StreamlitPageNotFoundError

from odapp.facts import view as facts_view
from odapp.shared import ahead, guide, sidebar
from odapp.shared.export import code_caption
from odapp.shared.layout import compact_top
from odapp.shared.nav import NAV
from odapp.shared.words import pct, plain, probability_words, unit_words
from odcore import __version__
from odcore.privacy.attack import posterior_bound, success_curve

st.set_page_config(page_title="OD Privacy Lab", page_icon="🗺️", layout="wide")
compact_top()

st.title("OD Privacy Lab")
_exact = success_curve(0.66, 32)
st.markdown(
    f"""
**What "differential privacy" on aggregated mobility data does — and does not — protect, with real numbers.**

In 2019 Google shared weekly *origin–destination* (OD) trip counts of Google Maps users with researchers
(Bassolas et al.): for each week and each pair of ~1.3 km² grid cells, the number of distinct users who made that
trip, plus Laplace noise of scale 1/ε with ε = 0.66, and every noisy count below 100 removed. The release was
described as (ε = 0.66, δ = 2.1·10⁻²⁹)-differentially private, so that an attacker would gain at most about 16 % over
a random guess.

Houssiau et al. (Nature Communications, 2022) pointed out that this guarantee covers **one trip of one user in one
week** ("per metric"), not a **user**: someone with *k* distinct trips in a week is exposed *k* times. An attacker who
knows everyone else's data succeeds 70.5 % of the time at k = 3 and 95.4 % at k = 32 (their Monte Carlo; the exact
values at ε = 0.66, computed below, are {pct(float(_exact[3]))} and {pct(float(_exact[32]))}). Pyrgelis et al. (NDSS 2018,
"Knock Knock") showed that machine-learning classifiers infer membership from aggregate location time-series, and
measured what DP defences cost in accuracy.

This lab lets you load real traces or synthesise a city, pick a grid, ε and the suppression threshold, see the noised
OD flows on a map, and watch the attack-success and privacy-budget curves move.
"""
)

ctx = sidebar.render()   # the shared settings (data, week, grid, ε, threshold, seed) live in the sidebar
guide.panel(__file__, ctx)   # step 1 of the guided tour (odapp.shared.guide)

PAGE_NOTES = {
    "1_Data.py": "what was loaded, where, on which grid; total vs unique trips per person",
    "2_OD_release.py": "the week's published flows on a map, raw vs noised, and what suppression costs",
    "3_Attack.py": "how often the strongest attacker is right, for k trips and for real people of the week",
    "4_Privacy_budget.py": "one count vs a person's whole week: ε per week and over weeks, and what each ε allows",
    "5_Knock_Knock.py": "machine-learning membership inference on aggregate time-series, and DP defences",
    "6_Release_designer.py": "state a goal per person; get max pairs, noise and threshold, and what they keep",
    "7_Play_the_attacker.py": "be the attacker: guess in or out from the published counts, against the optimal attacker",
    "8_See_the_noise.py": "what gets published for one true count: the noise, the threshold, the chance of suppression",
    "9_Audit.py": "the guarantee measured on the release: canaries, an empirical lower bound on ε, partition selection",
}
st.subheader("Pages")
for e in NAV[1:]:
    c1, c2 = st.columns([1, 3])
    try:
        c1.page_link(e.file, label=e.title)
    except StreamlitPageNotFoundError:   # this file run on its own (AppTest.from_file): no navigation to link to
        c1.markdown(f"**{e.title}**")
    c2.markdown(PAGE_NOTES.get(e.file.removeprefix("pages/"), ""))

s = ctx.settings
f = facts_view.of(ctx)   # the numbers every page reads (odcore.report.facts), with their labels
ex = f["attack_example"]
if s.mode == "user_level":
    guard = (f"With at most {s.max_pairs} pairs per person and noise {s.max_pairs}/ε, an attacker who knows 32 of "
             f"someone's trips is right at most **{ex.text}** of the time ({probability_words(ex.value)})")
else:
    bound = posterior_bound(s.epsilon)
    guard = (f"At ε = {s.epsilon:g} the promise for one trip is an attacker right at most **{pct(bound)}** of the "
             f"time ({probability_words(bound)}); against someone with 32 unique trips the same release lets the "
             f"attacker be right **{ex.text}** of the time ({probability_words(ex.value)})")
typical = ""
if "attack_typical" in f:
    typical = (f" In the data in use, the typical person of week {s.week} ({f['typical_trips'].text} unique trips): "
               f"**{f['attack_typical'].text}** with suppression, {f['attack_typical_plain'].text} without "
               f"(the Attack page); the bound on any attacker about their week is {f['bound_typical'].text}.")
st.info(f"Guarantee unit: **{unit_words(s.mode)}**. {guard} — {ex.why}.{typical} Data in use: "
        f"{plain(s.dataset.label)}.", icon=":material/lightbulb:")

code_caption(f"odcore {__version__} · numbers computed by the `odcore` engine; see the README for where they come from.")

# While the person reads this page, the server computes what the OD release page shows first, so that it opens
# without waiting for it (odapp.shared.ahead).
ahead.start(ctx)
