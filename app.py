"""OD Privacy Lab: landing page (``streamlit run app.py``)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from odcore import __version__

st.set_page_config(page_title="OD Privacy Lab", page_icon="🗺️", layout="wide")

st.title("OD Privacy Lab")
st.markdown(
    """
**What "differential privacy" on aggregated mobility data does — and does not — protect, with real numbers.**

In 2019 Google shared weekly *origin–destination* (OD) trip counts of Google Maps users with researchers
(Bassolas et al.): for each week and each pair of ~1.3 km² grid cells, the number of distinct users who made that
trip, plus Laplace noise of scale 1/ε with ε = 0.66, and every noisy count below 100 removed. The release was
described as (ε = 0.66, δ = 2.1·10⁻²⁹)-differentially private, so that an attacker would gain at most about 16 % over
a random guess.

Houssiau et al. (Nature Communications, 2022) pointed out that this guarantee covers **one trip of one user in one
week** ("per metric"), not a **user**: someone with *k* distinct trips in a week is exposed *k* times. An attacker who
knows everyone else's data succeeds 70.5 % of the time at k = 3 and 95.4 % at k = 32. Pyrgelis et al. (NDSS 2018,
"Knock Knock") showed that machine-learning classifiers infer membership from aggregate location time-series, and
measured what DP defences cost in accuracy.

This lab lets you load real traces or synthesise a city, pick a grid, ε and the suppression threshold, see the noised
OD flows on a map, and watch the attack-success and privacy-budget curves move.
"""
)

pages = sorted((Path(__file__).parent / "pages").glob("*.py"))
if pages:
    st.subheader("Pages")
    for p in pages:
        st.page_link(str(p.relative_to(Path(__file__).parent)))
else:
    st.info("The analysis pages are being built; the engine is available from a shell as `python -m odcore --help`.")

st.caption(f"odcore {__version__} · numbers computed by the `odcore` engine; see the README for where they come from.")
