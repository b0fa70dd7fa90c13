"""Widgets whose value persists across pages: drawn under a widget key, always starting from the setting's own key
in session state, and copied back when the person changes it."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from odapp.shared.state import (
    widget_key,
)


def copy_to_persistent(key: str) -> None:
    st.session_state[key] = st.session_state[widget_key(key)]


def bound(key: str, widget: Callable, **kwargs):
    """Draw ``widget`` under the widget key of ``key``, always starting from the persistent value.

    Streamlit forgets a widget's state when a page that does not draw it runs (and a page switch makes new
    widgets), so the persistent key is the source of truth: it is copied into the widget key before drawing, and a
    change of the widget is copied back by the ``on_change`` callback, which runs before the script.
    """
    wk = widget_key(key)
    st.session_state[wk] = st.session_state[key]
    return widget(key=wk, on_change=copy_to_persistent, args=(key,), **kwargs)
