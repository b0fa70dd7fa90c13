"""The live-curve component: the page's ε slider and its curves, drawn in the browser at every frame of a drag.

``live_curves(...)`` mounts it. Python gives it plain data (``LiveTable.to_json`` tables and closed-form names), never
markup. On release the component's value is copied into the page's persistent setting by the ``on_change`` callback,
which runs before the rerun (as the sidebar's widgets do, :mod:`odapp.sidebar`).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

HERE = Path(__file__).resolve().parent
NAME = "odlab_live_curves"


@st.cache_resource(show_spinner=False)
def mount_function():
    """The component's mounting function (registered once per process)."""
    return st.components.v2.component(NAME, js=(HERE / "live.js").read_text(encoding="utf-8"),
                                      css=(HERE / "live.css").read_text(encoding="utf-8"), isolate_styles=False)


def table_series(name: str, table: dict, *, key: str, **style) -> dict:
    """A curve read from a table (:meth:`odcore.privacy.live.LiveTable.to_json`; ``style``: color, dash, width)."""
    return {"name": name, "key": key, "table": table, **style}


def formula_series(name: str, formula: str, x, *, key: str, args: dict | None = None, **style) -> dict:
    """A closed-form curve computed exactly in the browser: ``bound``, ``basic`` or ``advanced`` (``live.js``)."""
    return {"name": name, "key": key, "formula": formula, "x": [float(v) for v in x], "args": args or {}, **style}


def live_curves(*, state_key: str, value: float, label: str, span: tuple[float, float, float], charts: list[dict],
                page: str, key: str, columns: int = 1) -> float:
    """Draw the slider and ``charts``; return the value in use. On release the new value is written to
    ``st.session_state[state_key]`` before the page reruns.

    Each chart: ``id``, ``title`` (``{e}`` becomes the slider's value), ``xlabel``, ``ylabel``, ``series``
    (:func:`table_series`, :func:`formula_series`), optional ``ymin``/``ymax``, ``ylog``, ``ypct``, ``height``,
    ``vlines``/``hlines`` (``x``/``y``, ``label``, ``color``), ``readouts`` (``label``, ``series`` index, ``x``,
    ``fmt`` "pct")."""
    name = state_key.split(".", 1)[-1]

    def changed() -> None:
        got = st.session_state.get(key)
        got = got.get(name) if isinstance(got, dict) else getattr(got, name, None)
        if got is not None:
            lo, hi, step = span
            st.session_state[state_key] = round(round(min(max(float(got), lo), hi) / step) * step, 10)

    spec = {"name": name, "page": page, "value": float(value), "min": span[0], "max": span[1], "step": span[2],
            "label": label, "charts": charts, "columns": columns}
    mount_function()(key=key, data=spec, **{f"on_{name}_change": changed})
    return float(st.session_state[state_key])
