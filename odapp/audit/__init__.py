"""The Audit page: its cached one-run audit and partition-selection comparison."""
