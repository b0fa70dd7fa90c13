"""Tests of the engine, one folder per odcore package."""
