"""The OD release page: the published table, its map and its curve, and their cached computations."""
