"""Projector mode: one session flag for a class in front of a wall screen.

Large fonts, high-contrast colours and fewer controls. Everything reads the flag through :func:`on`: the page CSS
(:func:`apply`, called by the sidebar), the charts (``odapp.shared.styling.styled`` picks ``odcore.report.figures.template(projector=True)``)
and the pages, which hide their secondary controls (seeds, downloads, fine settings) and the engine's function names
with ``if not projector.on():``; the sidebar is narrower, so the picture gets the width.
"""

from __future__ import annotations

import streamlit as st

K_PROJECTOR = "odlab.projector"

_CSS = """
<style>
/* odlab-projector: large type that reflows at 1024x768 and 1280x720 (a school's projectors) */
html, body, .stApp, .stMarkdown, .stMarkdown p, .stMarkdown li, [data-testid="stCaptionContainer"] {
  font-size: 21px !important; color: #000 !important; }
[data-testid="stCaptionContainer"] { opacity: 1 !important; }
[data-testid="stCaptionContainer"], [data-testid="stCaptionContainer"] * { color: #1f1f1f !important; }
.stApp { background: #fff !important; }
/* a narrower sidebar (Streamlit's 300 px took a third of 1,024): the picture gets the width; the settings and the
   tour stay in it, their labels wrapping */
[data-testid="stSidebar"] { width: 236px !important; min-width: 236px !important; max-width: 236px !important; }
[data-testid="stSidebarContent"] { padding-left: 0 !important; padding-right: 0 !important; }
h1 { font-size: 2.6rem !important; color: #000 !important; }
h2, h3 { font-size: 1.9rem !important; color: #000 !important; }
/* words wrap between words, never inside one; long words shrink the type rather than break */
[data-testid="stMain"] *, [data-testid="stSidebar"] * { word-break: normal !important; overflow-wrap: normal !important;
  hyphens: manual !important; }
/* cards and side-by-side blocks stack when their column gets narrow: a column is at least 15 rem or the full row */
[data-testid="stMain"] [data-testid="stHorizontalBlock"] { flex-wrap: wrap !important; row-gap: 0.8rem !important; }
[data-testid="stMain"] [data-testid="stHorizontalBlock"] > [data-testid="stColumn"] {
  flex: 1 1 15rem !important; min-width: min(100%, 15rem) !important; width: auto !important; }
/* charts and maps beside each other stack too: a chart keeps the content's width */
[data-testid="stMain"] [data-testid="stHorizontalBlock"]:has([data-testid="stPlotlyChart"], [data-testid="stDeckGlJsonChart"], .odlive)
  > [data-testid="stColumn"] { flex: 1 1 100% !important; min-width: 100% !important; }
/* the OD release map's options stay in two rows, in smaller type, so the map starts on the first screen */
.st-key-rel_map_options [data-testid="stHorizontalBlock"] { flex-wrap: nowrap !important; }
.st-key-rel_map_options [data-testid="stHorizontalBlock"] > [data-testid="stColumn"] { flex: 1 1 0 !important;
  min-width: 0 !important; }
.st-key-rel_map_options [data-testid="stWidgetLabel"] p, .st-key-rel_map_options label p { font-size: 1rem !important; }
.st-key-rel_map_options input { font-size: 1rem !important; }
[data-testid="stMainBlockContainer"] { padding-left: 1.5rem !important; padding-right: 1.5rem !important;
  max-width: 100% !important; }
[data-testid="stMetricValue"] { font-size: clamp(1.9rem, 3.4vw, 3rem) !important; color: #000 !important;
  line-height: 1.15 !important; }
[data-testid="stMetricValue"] > div { white-space: nowrap !important; }
[data-testid="stMetricLabel"] p { font-size: 1.15rem !important; color: #000 !important; }
[data-testid="stMetricDelta"] * { color: #1f1f1f !important; font-size: 1rem !important; }
label, [data-testid="stWidgetLabel"] p { font-size: 1.15rem !important; color: #000 !important; }
button p { font-size: 1.15rem !important; font-weight: 700 !important; }
[data-testid="stSidebar"] button p { font-size: 1rem !important; }
[data-testid="stAlert"] { border: 3px solid #000 !important; }
[data-testid="stAlert"] p { color: #000 !important; }
a { color: #003f88 !important; text-decoration: underline !important; }
[data-testid="stPageLink"] p, [data-testid="stPageLink"] span { font-size: 1.15rem !important; }
/* a select box shows its choice on one line (an input never wraps): smaller type and padding there, and short
   choices in projector mode (odapp.shared.sidebar.MODE_LABELS_PROJECTOR, week_label), so the whole choice shows */
[data-testid="stSidebar"] [data-testid="stSelectbox"] input { font-size: 0.85rem !important; text-overflow: clip !important;
  padding-left: 0.4rem !important; padding-right: 0 !important; }
</style>
"""


def on() -> bool:
    """Is projector mode on in this session?"""
    return bool(st.session_state.get(K_PROJECTOR, False))


def set_on(value: bool) -> None:
    st.session_state[K_PROJECTOR] = bool(value)


def _copy() -> None:
    set_on(st.session_state["w.projector"])


def toggle() -> None:
    """The sidebar switch (kept across pages under :data:`K_PROJECTOR`)."""
    st.session_state["w.projector"] = on()
    st.toggle("Projector mode", key="w.projector", on_change=_copy,
              help="For a class: large fonts, high-contrast colours and charts, and the secondary controls "
                   "(seeds, downloads, fine settings) hidden.")


def apply() -> None:
    """Inject the projector stylesheet when the mode is on (call once per run, after :func:`toggle`).

    The element is there in both modes (an empty stylesheet when off): Streamlit's browser side matches elements by
    position, so an element that appears only in projector mode moved every chart and map below it, and the browser
    rebuilt them from scratch (plotly's first draw, deck.gl's shaders in software) instead of updating them: about
    3.5 s of the Data page's toggle."""
    st.markdown(_CSS if on() else "<style></style>", unsafe_allow_html=True)
