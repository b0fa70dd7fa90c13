"""The lab's map element: a deck description (:mod:`odapp.maps`) drawn in the browser only when something changes.

``deck_map(deck, height=…, key=…)`` mounts it where ``st.pydeck_chart`` went. Python gives it plain data: the deck's
JSON (layers, first view and the box the first view is fitted to, ``fit``) and its tooltip. ``map.js`` draws it with
Canvas 2D on a Web Mercator view when the data, the element's size, a drag, a wheel turn or the object under the
pointer changes, and not otherwise: an idle map page costs no CPU (docs/flow_map.md, idle cost).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

HERE = Path(__file__).resolve().parent
NAME = "odlab_map"


@st.cache_resource(show_spinner=False)
def mount_function():
    """The component's mounting function (registered once per process)."""
    return st.components.v2.component(NAME, js=(HERE / "map.js").read_text(encoding="utf-8"),
                                      css=(HERE / "map.css").read_text(encoding="utf-8"), isolate_styles=False)


def map_data(deck, *, height: int, key: str | None = None) -> dict:
    """What the element receives: the deck's JSON text (a :class:`odapp.maps.FrozenDeck` makes it once), its
    tooltip (``{"text": "{tip}", "style": {...}}`` or none), the height in px and the key (``window.odmap[key]`` in
    the browser holds what was drawn: per layer the objects sent and drawn, each draw's time, the view)."""
    tip = getattr(deck, "_tooltip", None)
    return {"deck": deck.to_json(), "tooltip": tip if isinstance(tip, dict) else None, "height": int(height),
            "id": key or ""}


def deck_map(deck, *, height: int, key: str | None = None, where=None) -> None:
    """Draw ``deck`` (a :class:`pydeck.Deck` made by :mod:`odapp.maps`) ``height`` px tall in ``where`` (a column or
    container; default: the page). Its first view is fitted, at the element's width and height in the browser, to
    the deck's ``fit`` box when it has one (:func:`odapp.maps.deck`), else it is the deck's ``initial_view_state``.
    A deck with the online base map on (``map_provider`` set, :data:`odapp.maps.BASEMAP`) goes to
    ``st.pydeck_chart``: CARTO's vector tiles are deck.gl's to draw."""
    if getattr(deck, "map_provider", None):
        # the online base map (odapp.maps.BASEMAP, opt-in): CARTO's vector tiles, which only deck.gl draws
        (where or st).pydeck_chart(deck, height=height, key=key)
        return
    data = map_data(deck, height=height, key=key)
    if where is None:
        mount_function()(key=key, data=data)
    else:
        with where:
            mount_function()(key=key, data=data)
