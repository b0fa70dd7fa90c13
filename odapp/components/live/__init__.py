"""The live-curve component: the page's ε slider and its curves, drawn in the browser at every frame of a drag.

``live_curves(...)`` mounts it. Python gives it plain data (``LiveTable.to_json`` tables and closed-form names), never
markup. On release the component's value is copied into the page's persistent setting by the ``on_change`` callback,
which runs before the rerun (as the sidebar's widgets do, :mod:`odapp.shared.sidebar`).

Two elements: the tables (and the OD release's noise draws) and the drawing code (``live.js``) do not change when
the slider moves, while the slider's value does. So they travel in an invisible element of their own
(``odlab_live_data``), the same on every release of the slider, which Streamlit's message cache then replaces by a
reference to what the browser already holds; the curves' element (``odlab_live_curves``) carries the settings, the
charts with their tables named by content hash, and a stub (``stub.js``) that calls the code. A press of ε on the
Privacy budget page received ~200 KiB with both in one element.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import streamlit as st

from odapp.shared import projector

HERE = Path(__file__).resolve().parent
NAME = "odlab_live_curves"
DATA_NAME = "odlab_live_data"


@st.cache_resource(show_spinner=False)
def mount_function():
    """The component's mounting function (registered once per process)."""
    return st.components.v2.component(NAME, js=(HERE / "stub.js").read_text(encoding="utf-8"),
                                      css=(HERE / "live.css").read_text(encoding="utf-8"), isolate_styles=False)


@st.cache_resource(show_spinner=False)
def data_mount_function():
    """The tables' and code's element (registered once per process): draws nothing (``live.js``)."""
    return st.components.v2.component(DATA_NAME, js=(HERE / "live.js").read_text(encoding="utf-8"),
                                      isolate_styles=False)


_ENCODED: dict[int, tuple[object, str, str]] = {}   # id(table) -> (table, name, JSON)
_ENCODED_MAX = 256


def _encoded(value) -> tuple[str, str]:
    """``(name, JSON text)`` of a table. The tables come from resource caches (:mod:`odapp.live.cache`): the same object
    on every rerun, so its JSON is written once, not on every press (~20 ms for the OD release page's draws). The
    table is kept with its entry, so its ``id`` cannot be another object's while the entry lives."""
    hit = _ENCODED.get(id(value))
    if hit is not None and hit[0] is value:
        return hit[1], hit[2]
    text = json.dumps(value, separators=(",", ":"), sort_keys=True)
    name = hashlib.blake2b(text.encode(), digest_size=10).hexdigest()
    _ENCODED[id(value)] = (value, name, text)
    while len(_ENCODED) > _ENCODED_MAX:
        _ENCODED.pop(next(iter(_ENCODED)), None)
    return name, text


def split_tables(charts: list[dict], pairs: dict | None) -> tuple[list[dict], dict | None, str]:
    """``charts`` and ``pairs`` with every series' ``table`` and the ``pairs`` draws replaced by ``{"$ref": name}``,
    and the carrier's ``{name: value}`` as JSON text (Streamlit then sends one string instead of encoding every
    number of the tables again): what :func:`live_curves` sends in its two elements. A table's name is a hash of its
    JSON: the same table always gets the same name.

    >>> t = {"x": [1.0, 2.0]}
    >>> charts, _, text = split_tables([{"series": [{"table": t}]}], None)
    >>> name = charts[0]["series"][0]["table"]["$ref"]
    >>> text == '{"%s":{"x":[1.0,2.0]}}' % name, split_tables([{"series": [{"table": dict(t)}]}], None)[2] == text
    (True, True)
    """
    blobs: dict[str, str] = {}

    def ref(value) -> dict:
        name, text = _encoded(value)
        blobs[name] = text
        return {"$ref": name}

    out = []
    for c in charts:
        series = [{**x, "table": ref(x["table"])} if isinstance(x.get("table"), dict) else x
                  for x in c.get("series", ())]
        out.append({**c, "series": series} if "series" in c else c)
    pairs_ref = ref(pairs) if pairs is not None else None
    return out, pairs_ref, "{" + ",".join(f'"{n}":{t}' for n, t in blobs.items()) + "}"


def table_series(name: str, table: dict, *, key: str, **style) -> dict:
    """A curve read from a table (:meth:`odcore.privacy.live.LiveTable.to_json`; ``style``: color, dash, width)."""
    return {"name": name, "key": key, "table": table, **style}


def formula_series(name: str, formula: str, x=None, *, key: str, args: dict | None = None, span: dict | None = None,
                   **style) -> dict:
    """A closed-form curve computed exactly in the browser: ``bound``, ``basic``, ``advanced``, ``basic_k`` and
    ``advanced_at`` (against δ), ``release``, ``identity``, ``release_pair`` or ``laplace`` (``live.js``; a chart with
    ``"xlog": True`` has a log x axis), at ``x`` or on ``span`` (``{"mult", "of", "floor",
    "n"}``: n points from 0 to max(mult·slider, floor); ``{"noise": True, "n"}``: the noisy counts around the true
    count ``args["center"]``, as :meth:`odcore.report.teaching.NoisePicture.density`)."""
    out = {"name": name, "key": key, "formula": formula, "args": args or {}, **style}
    if span is not None:
        out["span"] = span
    else:
        out["x"] = [float(v) for v in x]
    return out


def control(state_key: str, value: float, label: str, span: tuple[float, float, float], *,
            name: str | None = None) -> dict:
    """A slider of the component: the page's setting under ``state_key``; ``name`` (default: the key after the
    dot) is how the curves' formulas call it ("epsilon", "threshold")."""
    return {"name": name or state_key.split(".", 1)[-1], "state_key": state_key, "value": float(value),
            "label": label, "min": span[0], "max": span[1], "step": span[2]}


def live_curves(*, controls: list[dict], charts: list[dict], page: str, key: str, columns: int = 1,
                pairs: dict | None = None, fixed: dict | None = None, fit: dict | None = None,
                follow: str | None = None) -> None:
    """Draw the sliders (:func:`control`) and ``charts``. On release a slider's value is written to its
    ``st.session_state[state_key]`` (rounded to the slider's step) before the page reruns.

    Each chart: ``id``, ``title`` (``{epsilon}``, ``{threshold}``: the sliders' values), ``xlabel``, ``ylabel``,
    ``series`` (:func:`table_series`, :func:`formula_series`), optional ``ymin``/``ymax``, ``ylog``, ``ypct``,
    ``height``, ``xmin``, ``xmax`` (a number, or ``{"mult", "of", "floor"}``: a range that follows a slider), ``vlines``/``hlines``
    (``x``/``y`` a number or a slider's name, ``label``, ``color``), ``readouts`` (``label``, ``series`` index,
    ``x``, ``fmt`` "pct", ``posterior`` prior), ``bars`` (a histogram on a right log axis), ``published`` (draw
    ``pairs``' published counts), ``xticks`` "int", ``xticklabels`` ({"3": "3 (104)"}: a tick's text),
    ``xtickvals`` with ``xticktext`` (the x ticks given), ``legend`` "top" or "below" (always under the plot). A
    series may be drawn as dots (``marker``: radius, ``offset`` in px; ``symbol`` circle, diamond, star or x;
    ``open``: outlined, for every point or per point; ``line``: joined by a line; ``hover``: a text per point,
    shown while the pointer is within 12 px of it) or filled under, grey below the threshold and ``fill`` above it; a readout may be a closed form at the
    settings (``formula``, ``args``, ``key``), a series' sum (``sum``: its index) and may ``join`` the one before
    ("a – b"). ``pairs``: :func:`odcore.privacy.live.coherent_draws`. ``fixed``: settings the
    formulas read that have no slider here (the per-person threshold).

    In projector mode (:func:`odapp.shared.projector.on`) the charts are drawn with the type sizes of the plotly charts'
    projector template (``odcore.report.figures.template``) and their legend under the plot; a chart narrower
    than 560 px puts its legend there too. Titles wrap at spaces to the chart's width in both modes."""

    def changed(c: dict) -> None:
        got = st.session_state.get(key)
        got = got.get(c["name"]) if isinstance(got, dict) else getattr(got, c["name"], None)
        if got is not None:
            v = round(round(min(max(float(got), c["min"]), c["max"]) / c["step"]) * c["step"], 10)
            st.session_state[c["state_key"]] = int(v) if float(c["step"]).is_integer() else v

    charts, pairs, blobs = split_tables(charts, pairs)
    spec = {"page": page, "controls": [{k: v for k, v in c.items() if k != "state_key"} for c in controls],
            "charts": charts, "columns": columns, "pairs": pairs, "fixed": fixed or {}, "fit": fit,
            "follow": follow, "projector": projector.on()}
    callbacks = {f"on_{c['name']}_change": (lambda c=c: changed(c)) for c in controls}
    # first, so the curves usually find the code and their tables already there (stub.js waits otherwise)
    data_mount_function()(key=f"{key}_data", data={"blobs": blobs})
    mount_function()(key=key, data=spec, **callbacks)


def fit_spec(max_pairs: int, delta: float) -> dict:
    """``fit`` of :func:`live_curves`: the constants of :func:`odcore.privacy.accounting.partition_threshold` for one
    week (τ = 1 − (m/ε)·log(2·δ_adj), δ_adj = 1 − (1 − δ)^(1/m)), so the browser computes the fitted threshold at
    any ε."""
    m = int(max_pairs)
    return {"m": m, "log2d": math.log(2.0 * -math.expm1(math.log1p(-float(delta)) / m))}
