"""Tests of Knock Knock (odcore.knock)."""
