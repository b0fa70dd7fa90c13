"""Engine errors shown as ``st.error`` with what to do next (never a traceback)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

from odcore.errors import ODCoreError


@contextmanager
def engine_errors(what: str, hint: str = "Change the setting named in the message and try again.",
                  *, stop: bool = True) -> Iterator[None]:
    """Run engine calls; an :class:`~odcore.errors.ODCoreError` becomes ``st.error`` (and stops the page).

    Only the engine's own error family is caught: anything else is a bug and must stay visible in the logs.
    """
    try:
        yield
    except ODCoreError as exc:
        st.error(f"**{what}** — {exc}\n\n{hint}", icon="⚠️")
        if stop:
            st.stop()
