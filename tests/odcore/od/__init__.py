"""Tests of counting: trips, OD tables and the engines (odcore.od)."""
