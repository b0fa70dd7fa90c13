"""From traces to the weekly OD table: local hours, winner-takes-all cells, trips, distinct users per pair, counted
with each person's contribution bounded.

``trips`` is the in-memory build and ``kernel`` the steps every engine shares; ``engines`` runs the same definition
on DuckDB and Spark; ``pairs`` prepares a week's per-person pairs and bounds each person's contribution by the keyed
hash of ``bounding``; ``odtable`` reads and writes OD counts folders.
"""
