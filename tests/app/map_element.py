"""Reading the lab's map element (:mod:`odapp.components.map`) in an AppTest run: the elements, their deck JSON
text and the decks it describes (layers, first view, ``fit`` box), as the browser receives them."""

from __future__ import annotations

import json

from odapp.components.map import NAME


def map_elements(at) -> list:
    """The page's map elements, in page order."""
    return [e for e in at.get("bidi_component") if e.proto.component_name == NAME]


def map_data(el) -> dict:
    """What one map element sends: ``deck`` (JSON text), ``tooltip``, ``height``, ``id``."""
    return json.loads(el.proto.json)


def deck_text(el) -> str:
    """The deck JSON text one map element sends."""
    return map_data(el)["deck"]


def decks(at) -> list[dict]:
    """The decks of the page's maps: its map elements', then those drawn by ``st.pydeck_chart`` (the online base map
    on, :func:`odapp.components.map.deck_map`)."""
    return ([json.loads(deck_text(e)) for e in map_elements(at)]
            + [json.loads(e.proto.json) for e in at.get("deck_gl_json_chart")])
