"""Tests of figures, flow maps, teaching and what is handed over (odcore.report)."""
