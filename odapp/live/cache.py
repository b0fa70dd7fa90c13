"""The tables the live curves interpolate while ε is dragged (attack, budget, δ, weeks, the week's release, one
person's success), cached server-wide."""

from __future__ import annotations

import numpy as np

from odapp.shared.caching import cache_data, cache_resource, kept, live_json
from odcore.privacy.live import (
    attack_tables,
    coherent_draws,
    delta_tables,
    person_success,
    trips_tables,
    weeks_tables,
)
from odcore.report.figures import integer_bins


@cache_resource(max_entries=32, show_spinner="Tabulating the attack curves for the live slider…")
def live_attack_tables(k_max: int, max_pairs: int | None) -> dict:
    """:func:`odcore.privacy.live.attack_tables` as the browser reads them (shared by every session, read-only)."""
    return kept("liveattack", live_json(attack_tables), k_max, max_pairs)


@cache_resource(max_entries=32, show_spinner="Tabulating the budget curves for the live slider…")
def live_trips_tables(trips_max: int, delta: float, max_pairs: int | None) -> dict:
    """:func:`odcore.privacy.live.trips_tables` as the browser reads them (shared, read-only)."""
    return kept("livetrips", live_json(trips_tables), trips_max, delta, max_pairs)


@cache_resource(max_entries=32, show_spinner="Tabulating ε against δ for the live slider…")
def live_delta_tables(trips: int) -> dict:
    """:func:`odcore.privacy.live.delta_tables` as the browser reads them (shared, read-only)."""
    return kept("livedelta", live_json(delta_tables), trips)


@cache_resource(max_entries=32, show_spinner="Tabulating the budget over weeks for the live slider (a few seconds)…")
def live_weeks_tables(trips: int, weeks: int, delta: float, relative_step: float, max_pairs: int | None) -> dict:
    """:func:`odcore.privacy.live.weeks_tables` as the browser reads them (shared, read-only; ``relative_step``: the
    loss-grid step per unit of ε, :data:`odcore.privacy.accounting.WEEKS_RELATIVE_STEP`)."""
    return kept("liveweeksrel", live_json(weeks_tables), trips, weeks, delta, relative_step, max_pairs)


@cache_resource(max_entries=16, show_spinner=False)
def live_release(dataset_id: str, od_config, week: int, mode: str, max_pairs: int | None, seed: int,
                 sensitivity: float, _scale: float, _table) -> dict:
    """The OD release page's live tables: the unit draws by true count (:func:`odcore.privacy.live.coherent_draws`)
    and the histogram of the true counts (bins up to twice the largest threshold), shared and read-only. Not keyed
    on ε or the threshold: ``_scale`` only turns the week's noise into unit draws, which are the same for every ε
    and threshold of a seed (the release draws ``scale · u``)."""
    tc = _table["true_count"].to_numpy(dtype=float)
    p99 = float(np.percentile(tc, 99)) if len(tc) else 1.0
    hist, edges = integer_bins(tc, max(1000.0, p99), max_bins=400)
    keep = hist > 0
    return {"draws": coherent_draws(tc, _table["noise"].to_numpy(dtype=float), _scale, sensitivity), "p99": p99,
            "bars": {"x": ((edges[:-1] + edges[1:]) / 2)[keep].tolist(), "w": np.diff(edges)[keep].tolist(),
                     "y": hist[keep].astype(float).tolist()}}


@cache_data(max_entries=64, show_spinner="Tabulating this person's attack success for the live slider…")
def live_person(others: tuple[float, ...], max_pairs: int, thresholds: tuple[float, ...] | float) -> list[float]:
    """:func:`odcore.privacy.live.person_success` (``others``: sorted counts, as for :func:`user_risk`)."""
    return person_success(others, max_pairs, thresholds).tolist()
