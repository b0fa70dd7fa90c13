"""Page scaffolding shared by every page: config, title, plain-language intro, the shared sidebar."""

from __future__ import annotations

import streamlit as st

from odapp import sidebar


def page(title: str, intro: str, *, icon: str = "🗺️") -> sidebar.PageContext:
    """Set up a page: browser title, heading, two or three sentences of plain language, the shared sidebar."""
    st.set_page_config(page_title=f"{title} · OD Privacy Lab", page_icon=icon, layout="wide")
    compact_top()
    st.title(title)
    st.markdown(intro)
    return sidebar.render()


def metric(col, label: str, value: str, words: str | None = None, help: str | None = None) -> None:
    """``st.metric`` with an optional plain-language reading underneath."""
    col.metric(label, value, help=help)
    if words:
        col.caption(words)


def compact_top() -> None:
    """Less empty space above the title (Streamlit's default is 6 rem), so a page's first chart or map starts
    within the first screen at 1024×768."""
    st.html("<style>[data-testid='stMainBlockContainer']{padding-top:2.2rem}</style>")
