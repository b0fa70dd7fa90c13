"""Tests of grids and zones (odcore.space)."""
