"""The guided path: a first-visit walkthrough from "what is an OD flow" to "why 0.66 per count can mean
near-certainty per person", one step per page, with the controls to touch at each step.

The steps are data (:data:`STEPS`); a page shows its step with one call, ``guide.panel(__file__, ctx)``. The tour is
open on a first visit, can be closed ("Close the tour") and reopened from the sidebar ("Guided tour"). The last
step offers the printable worksheet, whose answers :mod:`odcore.report.teaching` computes for the current settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from odapp.data import cache as data_cache
from odapp.game import cache as game_cache
from odapp.shared import projector
from odapp.shared.nav import HOME_FILE
from odcore.report.teaching import THEORY_ROUNDS, worksheet_html, worksheet_items

K_OPEN = "odlab.guide_open"     # the tour is shown (True on a first visit)
K_STARTED = "odlab.guide_started"   # the visitor has been on step 1 or pressed Back/Next/Guided tour


@dataclass(frozen=True)
class Step:
    page: str                    # as st.switch_page takes it ("pages/0_Home.py", "pages/3_Attack.py")
    title: str
    text: str
    controls: tuple[str, ...]    # what to touch on this page


STEPS: tuple[Step, ...] = (
    Step(HOME_FILE, "What is an OD flow?",
         "An origin–destination (OD) flow is the number of **distinct people** who went from one ~1.3 km² grid "
         "cell to another in a week. Google published such counts, each with a little random noise, and removed "
         "the small ones. This tour shows what that protects — and what it does not.",
         ("**Google/Bassolas 2019 setting** (sidebar): the release as Google ran it",
          "**Projector mode** (sidebar): large type for a class")),
    Step("pages/1_Data.py", "Who travels where",
         "Each person's location fixes become hourly grid cells, and a move to another cell is a trip. Look at "
         "how many *different* trips one person makes in a week: that number, k, is what the attack feeds on.",
         ("**Week** (sidebar)", "the chart of total vs unique trips per person")),
    Step("pages/2_OD_release.py", "What gets published",
         "Every count gets noise, and counts whose noisy value is below the threshold are not published. "
         "Lower the threshold and watch more pairs appear.",
         ("**Threshold** (above the curves): drag it to 20 and watch the counts published, then the preset button "
          "to go back",
          "**Map**: published vs the true counts, or side by side")),
    Step("pages/8_See_the_noise.py", "The noise on one count",
         "Pick a true count and see what gets published: a number a few people off, or nothing at all. "
         "This is all the protection one count gets.",
         ("**True count c**: drag it across the threshold", "**ε**: smaller means more noise")),
    Step("pages/3_Attack.py", "One trip vs many trips",
         "ε = 0.66 protects *one* count. An attacker who knows k of your trips gets k noisy hints. Watch the "
         "success climb from a coin flip to near-certainty as k grows.",
         ("**ε** (above the curve): drag it and watch the curve follow",
          "**Person**: a real person of the week, in the thresholded release")),
    Step("pages/7_Play_the_attacker.py", "Play the attacker",
         "Now you are the attacker: look at the published counts on someone's trips and guess whether they are "
         "in. The lab's optimal attacker plays the same rounds; compare your score with its score and the theory.",
         ("**In** / **Out**", "**Known trips**: climb from k = 1 to 32", "**Class mode**: one code, same rounds")),
    Step("pages/4_Privacy_budget.py", "Why 0.66 per count can mean near-certainty per person",
         "Add up the ε of all of a person's trips and weeks: per person the budget is tens or hundreds, far "
         "outside the usual range, and each ε reads as an attacker's best possible confidence.",
         ("**Unique trips of the user per week (n)**", "**Weeks released (W)**",
          "the same week in both units (per count vs per person)")),
)


def _index(page_file: str) -> int | None:
    name = Path(page_file).name
    for i, s in enumerate(STEPS):
        if Path(s.page).name == name:
            return i
    return None


def is_open() -> bool:
    return bool(st.session_state.setdefault(K_OPEN, True))


def _close() -> None:
    st.session_state[K_OPEN] = False


def _start() -> None:
    st.session_state[K_STARTED] = True


def reopen_button() -> None:
    """Sidebar button: reopen the tour at step 1."""
    if st.button("Guided tour", key="guide_reopen", icon=":material/school:", width="stretch",
                 help="Open the guided tour again, from step 1 (what an OD flow is)."):
        st.session_state[K_OPEN] = True
        _start()
        st.switch_page(STEPS[0].page)


def worksheet(settings, od=None, pool=None, od_config=None) -> str:
    """The printable worksheet (HTML) for these settings; answers from :func:`odcore.report.teaching.worksheet_items`."""
    rcfg = settings.release_config()
    theory = {}
    median = None
    if od is not None:
        median = data_cache.median_trips(settings.dataset.id, od_config, settings.week, _od=od)
        if pool is None:
            pool = game_cache.attacker_pool(settings.dataset.id, od_config, settings.week, rcfg, settings.seed, _od=od)
        for k in (3, 32):
            if pool.eligible(k).size:
                s = game_cache.game_theory(settings.dataset.id, od_config, settings.week, rcfg, settings.seed,
                                      settings.seed % 2 ** 20, k, THEORY_ROUNDS, _pool=pool)
                theory[k] = float(s.mean())
    items = worksheet_items(settings.epsilon, settings.threshold,
                            game_theory=theory, median_trips=median)
    text = (f"Settings: ε = {settings.epsilon:g} per count, threshold {settings.threshold:g}, "
            f"{'per metric' if settings.mode == 'per_metric' else f'per user (max {settings.max_pairs} pairs)'}, "
            f"week {settings.week}, data: {settings.dataset.label}.")
    return worksheet_html(items, settings=text)


def panel(page_file: str, ctx=None) -> None:
    """Show this page's step of the tour (nothing when the tour is closed or the page has no step), at the top of
    the sidebar (``ctx.tour``), so that the page opens on its picture."""
    i = _index(page_file)
    if i is None or not is_open():
        return
    step = STEPS[i]
    n = len(STEPS)
    if i == 0:
        _start()
    slot = ctx.tour if ctx is not None and ctx.tour is not None else st   # beside the picture
    _panel(i, step, n, ctx, slot)


def _panel(i: int, step: Step, n: int, ctx, slot) -> None:
    """The step's box, made in ``slot`` (the sidebar's slot for it, or where the page is)."""
    if not st.session_state.get(K_STARTED, False):
        # A first visit that lands straight on a deeper page: offer the tour in one line rather than push the
        # page's content (the OD release map) below the first screen.
        with slot.expander(f":material/school: Guided tour · step {i + 1} of {n}: {step.title}", expanded=False):
            _step_body(i, step, n, ctx)
        return
    with slot.container(border=True, key=f"guide_step_{i + 1}"):
        st.markdown(f"#### :material/school: Guided tour · step {i + 1} of {n}: {step.title}")
        _step_body(i, step, n, ctx)


def _step_body(i: int, step: Step, n: int, ctx) -> None:
    """The step's text, the controls to touch, and the Back / Next / worksheet / Close buttons."""
    st.markdown(step.text)
    st.markdown("**Touch:** " + " · ".join(step.controls))
    row = st.container(horizontal=True, gap="small")   # one block (st.columns makes five)
    if i > 0 and row.button("← Back", key="guide_back", help=f"Step {i}: {STEPS[i - 1].title}", on_click=_start):
        st.switch_page(STEPS[i - 1].page)
    if i + 1 < n:
        if row.button(f"Next: {STEPS[i + 1].title} →", key="guide_next", type="primary",
                      help=f"Step {i + 2} of {n}, on its page.", on_click=_start):
            st.switch_page(STEPS[i + 1].page)
    elif ctx is not None and not projector.on():   # a download: hidden in projector mode, as its switch says
        row.download_button(
            "Worksheet (HTML, printable)", key="guide_worksheet", on_click="ignore", icon=":material/print:",
            data=lambda: worksheet(ctx.settings, ctx.od, od_config=ctx.od_config),
            file_name="od_privacy_lab_worksheet.html", mime="text/html",
            help="Questions for a class with the answers on a separate page, computed by the lab for the "
                 "current settings.")
    row.button("Close the tour", key="guide_close", on_click=_close,
               help="Hide the tour; reopen it with 'Guided tour' in the sidebar.")
