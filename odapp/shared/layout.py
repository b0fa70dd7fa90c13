"""Page scaffolding shared by every page: config, title, plain-language intro, the shared sidebar."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import get_script_run_ctx

from odapp.facts import view as facts_view
from odapp.shared import sidebar
from odapp.shared.nav import HOME_FILE, NAV, declare
from odapp.shared.words import UNIT_COVERS, num, sci, unit_words
from odcore.od.odtable import NO_PAIRS_REASON
from odcore.report.facts import TYPICAL_HOW

CARD_KEY = "odlab_card"   # the guarantee card's block (its CSS class st-key-odlab_card greys it while stale)
K_DECLARED = "odlab.navigation_declared"   # session_state: a run of this session ran under the app's navigation

PAGE_FILES = [Path(__file__).resolve().parents[2] / e.file for e in NAV[1:]]   # the pages after Home (odapp.shared.nav)


def page(title: str, intro: str, *, icon: str = "🗺️", live: tuple[str, ...] = (),
         headline: bool = True) -> sidebar.PageContext:
    """Set up a page: browser title, heading, two or three sentences of plain language, the shared sidebar
    (``live``: the settings whose slider the page draws with its live curves, :mod:`odapp.components.live`), and
    (``headline``) the OD release's guarantee card; a page whose ε is another mechanism's (Knock Knock's defences)
    leaves the card out."""
    st.set_page_config(page_title=f"{title} · OD Privacy Lab", page_icon=icon, layout="wide")
    compact_top()
    st.title(title, help=intro)   # the page's plain-language intro behind its title, so it opens on its picture
    ctx = sidebar.render(live=live)
    if headline:
        unit_headline(ctx)
    return ctx


def unit_headline(ctx: sidebar.PageContext) -> dict:
    """The guarantee in the chosen unit, at the top of every page, from the week's facts
    (:mod:`odcore.report.facts`, read through :func:`odapp.facts.view.of`): what the ε covers, the typical person's
    ε per week, the **bound** on any attacker about their week and the optimal **attack** on them in this release
    (with and without suppression), each named as what it is. Returns the facts."""
    s = ctx.settings
    f = facts_view.of(ctx)
    unit = unit_words(s.mode)
    summary = [f"ε {num(s.epsilon)} {unit}"]
    if "epsilon_person_week" in f:
        summary.append(f"typical person's week ε {f['epsilon_person_week'].text}")
    if "attack_typical" in f:
        summary.append(f"attack on them {f['attack_typical'].text} (bound {f['bound_typical'].text})")
    # one line that opens on the whole card; greyed while a live slider is dragged and the card not yet redone (the
    # expander's own key gives it the CSS class: no container around it, one message fewer on every rerun)
    with st.expander("**Guarantee:** " + " · ".join(summary), expanded=False, key=CARD_KEY):
        c = st.columns([2, 1, 1, 1, 1])
        c[0].markdown(f"**Guarantee unit: {unit}** — ε covers {UNIT_COVERS[s.mode]}.")
        metric(c[1], f"ε {unit}", num(s.epsilon))
        if "epsilon_person_week" in f:
            e, d = f["epsilon_person_week"], f["delta_person_week"]
            trips = f["typical_trips"].text if f["typical_trips"].value is not None else "any number of"
            metric(c[2], "Typical person's week: ε", e.text, f"{trips} unique trips; tight, δ {sci(d.value)}",
                   help=f"The typical person: {TYPICAL_HOW}. Tight ε of their week (exact privacy-loss "
                        f"distribution) at {e.why}; δ = {d.why}. Per count it adds up over their trips; per "
                        "person it is bounded whatever they do.")
            b = f["bound_typical"]
            metric(c[3], "Bound on any attacker", b.text, "about the typical person's week, from its ε and δ",
                   help=b.why.capitalize() + f": {b.definition}.")
        if "attack_typical" in f:
            a, p = f["attack_typical"], f["attack_typical_plain"]
            metric(c[4], "Attack on the typical person", a.text,
                   f"with suppression; {p.text} without",
                   help=f"{a.why.capitalize()}. {p.why.capitalize()}: {p.text}. The bound beside it holds for any "
                        "attacker and any week of that person; this attack is one attacker on this release.")
    return f


def metric(col, label: str, value: str, words: str | None = None, help: str | None = None) -> None:
    """``st.metric`` with an optional plain-language reading underneath: the metric's delta, grey and without an
    arrow, styled as a caption (``PAGE_CSS``). One element where a metric and a caption were two: every element is
    a message the browser handles on every rerun (about 1 ms each on a 2-core machine without a GPU)."""
    if words:
        col.metric(label, value, delta=words, delta_color="off", delta_arrow="off", help=help)
    else:
        col.metric(label, value, help=help)


PAGE_CSS = """<style>
[data-testid='stMainBlockContainer']{padding-top:2.2rem}
[data-testid='stMetricLabel'] *{white-space:normal!important;overflow:visible!important;text-overflow:clip!important}
[data-testid='stMetricValue']{font-size:clamp(1.35rem,2.3vw,2.25rem)}
[data-testid='stMetricValue'] *{overflow:visible!important;text-overflow:clip!important}
[data-testid='stWidgetLabel'] p{white-space:normal!important;overflow:visible!important}
[data-testid='stMetricDelta']{background:none!important;padding:0.25rem 0 0 0!important;height:auto!important}
[data-testid='stMetricDelta'] *{white-space:normal!important;overflow:visible!important;text-overflow:clip!important}
[data-testid='stCaptionContainer']{opacity:1!important}
[data-testid='stCaptionContainer'],[data-testid='stCaptionContainer'] *{color:#4a4f5c!important}
body.odlab-stale .st-key-odlab_card{opacity:.45;filter:grayscale(1);transition:opacity .15s}
body.odlab-stale .st-key-odlab_card summary::after{content:" — updates when the slider is released";font-style:italic}
</style>"""


def declared_navigation() -> None:
    """Make sure this run shows the app's own navigation (``app.py``: "Home" first), not the one Streamlit makes from
    the ``pages/`` folder.

    Until a run of the server has called ``st.navigation``, Streamlit treats an app with a ``pages/`` folder the old
    way: a session that opens a page by its own address (a bookmark of ``/Attack``) as the server's first visit runs
    that file alone, under a navigation whose first entry is "app", and every session does so until one opens the
    app's root (``AppTest`` starts every run that way). Such a run is told by its page registry, which holds the
    entry script itself; the page then declares the app's navigation itself (:func:`odapp.shared.nav.declare`, which also
    ends the old way for the server), which replaces the sidebar's and keeps this page: a page's address gives it
    the same id both ways. The run goes on (a rerun would lose a button's click), except in a session's first run,
    which has no click to lose: its widgets were registered under the folder's navigation, and the first submit of
    a form drawn then (the Release designer's goal) came back with the form's defaults, so a page opened at its own
    address starts that run again under the app's navigation."""
    ctx = get_script_run_ctx()
    first = ctx is not None and not st.session_state.get(K_DECLARED)   # the session's first run
    if first:
        st.session_state[K_DECLARED] = True
    if ctx is None or not getattr(PagesManager, "uses_pages_directory", False):
        return
    main = Path(ctx.pages_manager.main_script_path).resolve()
    if main.name == "app.py" and any(Path(str(p.get("script_path", ""))).resolve() == main
                                     for p in ctx.pages_manager.get_pages().values()):
        declare()
        page = ctx.pages_manager.get_pages().get(ctx.page_script_hash, {})
        if first and Path(str(page.get("script_path", ""))).name not in (main.name, Path(HOME_FILE).name):
            st.rerun()   # a page opened at its own address


def compact_top() -> None:
    """Page CSS for 1024×768: less empty space above the title (Streamlit's default is 6 rem), so a page's first
    chart or map starts within the first screen; metric and widget labels wrap instead of ending in "…"; metric
    values shrink with the window instead of being cut; captions at full opacity in a grey with WCAG AA contrast
    (8:1 on white; Streamlit's caption, at 60 % opacity, gave 3:1). First of all, the app's own navigation
    (:func:`declared_navigation`)."""
    declared_navigation()
    st.html(PAGE_CSS)
    freeze_long_lived()


_frozen_modules = 0


def freeze_long_lived() -> bool:
    """Move what is alive now into the garbage collector's permanent generation when new modules were imported.

    Streamlit runs a full collection after every script run (``runner.postScriptGC``, kept on for memory). With
    pandas, scipy, plotly, pydeck and the engine imported, that scan of ~180 000 long-lived objects took ~100 ms of
    every rerun, holding the GIL while the run's last message waited to be sent. The modules' objects live as long
    as the server, so the collector is told once to stop scanning them (``gc.freeze``, after a collection so that
    no garbage is frozen); objects made later (sessions, caches, figures) are still collected as before. It runs
    again only when a page imported modules not seen yet, so it happens a few times per server, not per rerun.
    Returns whether it froze.
    """
    global _frozen_modules
    if len(sys.modules) <= _frozen_modules:
        return False
    gc.collect()
    gc.freeze()
    _frozen_modules = len(sys.modules)
    return True


def needs_pairs(ctx: sidebar.PageContext, what: str) -> None:
    """Stop the page with a plain explanation when the data in use has no per-person pairs (an OD counts folder)."""
    if ctx.od.stats.get("pairs_available", True):
        return
    st.info(f"**{what} is not available for this data:** {NO_PAIRS_REASON} "
            "The OD release and Privacy budget pages work from the counts.")
    st.stop()
