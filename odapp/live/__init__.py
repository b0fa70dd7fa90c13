"""The live curves: what a page's live component draws while ε is dragged, and the tables it interpolates."""
