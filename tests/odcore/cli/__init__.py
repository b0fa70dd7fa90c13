"""Tests of the command line (odcore.cli)."""
