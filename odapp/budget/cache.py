"""The Privacy budget page's cached computations: exact budgets (privacy-loss distributions) per count, per person
and over weeks, kept on disk between launches (they depend on numbers alone)."""

from __future__ import annotations

import numpy as np

from odapp.shared.caching import cache_data, kept
from odcore.privacy import accounting as acc
from odcore.privacy import pld, pld_weeks
from odcore.privacy.accounting import budget as _budget


@cache_data(max_entries=64, show_spinner="Computing exact budgets (privacy-loss distributions)…")
def budget(config) -> dict:
    return kept("budget", _budget, config)


@cache_data(max_entries=64, show_spinner="Computing exact budgets (privacy-loss distributions)…")
def epsilon_vs_trips(epsilon: float, trips_max: int, delta: float):
    return kept("vstrips", acc.epsilon_vs_trips, epsilon, trips_max=trips_max, delta=delta)


@cache_data(max_entries=64, show_spinner="Computing exact budgets (privacy-loss distributions)…")
def epsilon_over_weeks(epsilon: float, trips: int, weeks: int, delta: float, interval: float | None = None,
                       lower: bool = True):
    return kept("overweeks", acc.epsilon_over_weeks, epsilon, trips=trips, weeks=weeks, delta=delta,
                 interval=interval, lower=lower)


@cache_data(max_entries=64, show_spinner="Computing exact budgets (privacy-loss distributions)…")
def epsilon_delta_curve(epsilon: float, k: int):
    return acc.epsilon_delta_curve(epsilon, k=k)


def budget_curves(epsilon: float, trips: int, weeks: int, delta: float, trips_max: int,
                  interval: float | None = None):
    """The budget page's curves against n and over weeks, each cached on its own inputs only (moving the weeks
    recomputes one). ``interval``: loss-grid step of the many-week tight bracket, of which the chart draws the upper
    end only (the lower end, for the chart's CSV: :func:`epsilon_over_weeks` with ``lower``). ε against δ is drawn
    from its live table; its exact values (:func:`epsilon_delta_curve`) are made for its files only."""
    return (epsilon_vs_trips(epsilon, trips_max, delta),
            epsilon_over_weeks(epsilon, trips, weeks, delta, interval, lower=False))


@cache_data(max_entries=32, show_spinner="Computing per-person budgets…")
def person_curves(epsilon: float, max_pairs: int, delta: float, vs_trips, over_weeks):
    """Add ``person_tight`` to the budget curves: per person with contribution bounding, the tight ε of a week
    for n trips (the min(n, m)-fold Laplace(ε/m)) and over 1..W weeks (upper end of the bracket)."""
    week, total = person_columns(epsilon, int(max_pairs), delta, int(vs_trips["trips"].max()),
                                 int(over_weeks["weeks"].max()))
    return vs_trips.assign(person_tight=week), over_weeks.assign(person_tight=total)


@cache_data(max_entries=64, show_spinner=False)
def person_columns(epsilon: float, max_pairs: int, delta: float, trips_max: int, weeks: int):
    """:func:`person_curves`' two columns, for n = 1..trips_max and w = 1..weeks (cached: every rerun of the budget
    page in the per-person unit draws them)."""
    def build(epsilon, m, delta, trips_max, weeks):
        n = np.minimum(np.arange(1, trips_max + 1), m)
        week = np.asarray(pld.epsilon_for_delta(delta, n, epsilon / m), dtype=float)
        w = np.arange(1, weeks + 1)
        step = acc.person_weeks_interval(epsilon, weeks)
        _, hi = pld_weeks.composed_epsilon_curve(delta, m, epsilon / m, w, interval=step)
        return week, np.minimum(hi, w * epsilon)

    return kept("personcolsrel", build, float(epsilon), int(max_pairs), float(delta), int(trips_max), int(weeks))
