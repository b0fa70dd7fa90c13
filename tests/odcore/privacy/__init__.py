"""Tests of the release, accounting, attack, designer and utility (odcore.privacy)."""
