"""The app's pydeck maps: the decks and legends, the zones drawn on them, the flows and their tooltips, the offline
base layer, and the OD release map built from them."""
