"""Tests of the package: metadata, entry point, layering and the house's rules."""
