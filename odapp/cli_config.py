"""The configuration behind a chart as JSON that ``python -m odcore <command> --config FILE.json`` accepts.

Keys are the command's flag names in snake_case (``--max-pairs`` -> ``max_pairs``); the CLI rejects unknown keys
and ignores the informative ``dataset`` key. Loader keys (``input``, ``format``, ``tz``, ``time_offset``, ``bbox``)
make the CLI read the same traces the same way as the app (the app never clips with a bounding box).
"""

from __future__ import annotations

from odapp.data import Loaded
from odapp.state import Settings


def _dataset(s: Settings, loaded: Loaded) -> dict:
    return {"label": s.dataset.label, "id": s.dataset.id}


def loader_keys(loaded: Loaded) -> dict:
    return dict(loaded.cli)


def release_config(s: Settings, loaded: Loaded) -> dict:
    """``python -m odcore release --config FILE.json --out DIR``."""
    cfg = {**loader_keys(loaded), "cell_km2": s.cell_km2, "epsilon": s.epsilon, "threshold": s.threshold,
           "mode": s.mode, "week": s.week, "seed": s.seed, "dataset": _dataset(s, loaded)}
    if s.mode == "user_level":
        cfg["max_pairs"] = s.max_pairs
    return cfg


def budget_config(s: Settings, *, trips: int, weeks: int, delta: float) -> dict:
    """``python -m odcore budget --config FILE.json``."""
    cfg = {"epsilon": s.epsilon, "threshold": s.threshold, "trips": int(trips), "weeks": int(weeks),
           "delta": float(delta), "mode": s.mode}
    if s.mode == "user_level":
        cfg["max_pairs"] = s.max_pairs
    return cfg


COMMANDS = {
    "release": "python -m odcore release --config {file} --out release_out/",
    "budget": "python -m odcore budget --config {file}",
}
