"""Tests of trajectory recovery (odcore.recover)."""
