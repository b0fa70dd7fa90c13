"""The Release designer: its cached search and frontier."""
