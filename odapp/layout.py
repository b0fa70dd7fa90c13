"""Page scaffolding shared by every page: config, title, plain-language intro, the shared sidebar."""

from __future__ import annotations

import streamlit as st

from odapp import sidebar


def page(title: str, intro: str, *, icon: str = "🗺️") -> sidebar.PageContext:
    """Set up a page: browser title, heading, two or three sentences of plain language, the shared sidebar."""
    st.set_page_config(page_title=f"{title} · OD Privacy Lab", page_icon=icon, layout="wide")
    st.title(title)
    st.markdown(intro)
    return sidebar.render()


def metric(col, label: str, value: str, words: str | None = None, help: str | None = None) -> None:
    """``st.metric`` with an optional plain-language reading underneath."""
    col.metric(label, value, help=help)
    if words:
        col.caption(words)
