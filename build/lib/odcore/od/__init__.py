"""From traces to the weekly OD table: local hours, winner-takes-all cells, trips, distinct users per pair.

``trips`` is the in-memory build; ``engines`` runs the same definition on DuckDB and Spark; ``odtable`` reads and
writes OD counts folders.
"""
