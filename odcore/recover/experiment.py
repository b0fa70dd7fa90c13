"""Accuracy of the recovery against ε for each defence, the chance baseline, and the ε where the two meet."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from odcore.errors import ParameterError, check_positive
from odcore.recover.aggregates import Population
from odcore.recover.defences import Defence, DefenceSpec, defend
from odcore.recover.phases import RecoveryConfig, day_bounds, recover
from odcore.recover.score import chance_accuracy, score

#: Accuracy within this of the chance baseline counts as "at chance" (absolute, 0.5 percentage point).
CHANCE_TOLERANCE = 0.005


@dataclass(frozen=True)
class SweepConfig:
    """Defences × ε to run the attack under (every run on fresh noise from one seeded generator)."""

    defences: tuple[str, ...] = ("laplace", "threshold", "bounding", "lpa")
    epsilons: tuple[float, ...] = (0.1, 1.0, 10.0, 100.0)
    threshold: float = 5.0
    max_slots: int = 24
    recovery: RecoveryConfig = field(default_factory=RecoveryConfig)
    chance_reps: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "defences", tuple(str(d) for d in self.defences))
        choices = [d.value for d in Defence if d != Defence.NONE]
        bad = [d for d in self.defences if d not in choices]
        if bad:
            raise ParameterError(f"unknown defence(s) {bad}; choose from {choices} (no defence is always run).")
        if not self.epsilons:
            raise ParameterError("epsilons must hold at least one value.")
        object.__setattr__(self, "epsilons", tuple(sorted(check_positive("epsilon", e) for e in self.epsilons)))


def chance_epsilon(epsilons, accuracy, baseline: float, tol: float = CHANCE_TOLERANCE) -> dict[str, Any]:
    """Where the accuracy-against-ε curve comes down to ``baseline + tol``: interpolated linearly in log ε between
    the last grid point at or below it and the next one above it. ``below_grid``/``above_grid`` when the whole
    curve is above / at or below that level.

    >>> round(chance_epsilon([0.1, 1, 10], [0.05, 0.05, 0.5], 0.05)["epsilon"], 3)
    1.026
    """
    e = np.asarray(epsilons, dtype=float)
    a = np.asarray(accuracy, dtype=float)
    level = baseline + tol
    at = a <= level
    if not at.any():
        return {"epsilon": None, "where": "below_grid", "level": level}
    last = int(np.flatnonzero(at).max())
    if last == len(e) - 1:
        return {"epsilon": None, "where": "above_grid", "level": level}
    x0, x1 = math.log(e[last]), math.log(e[last + 1])
    y0, y1 = a[last], a[last + 1]
    x = x0 + (level - y0) / (y1 - y0) * (x1 - x0) if y1 != y0 else x0
    return {"epsilon": float(math.exp(x)), "where": "inside_grid", "level": level}


def run_sweep(pop: Population, config: SweepConfig | None = None,
              progress: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
    """Recover and score ``pop`` with no defence, then under every defence × ε of ``config``.

    Returns a JSON-ready dict: ``rows`` (defence, ε, accuracy, per-day accuracy, re-identified by top-2),
    ``chance`` (baseline), ``chance_epsilon`` per defence, ``no_defence`` (the full :class:`Score` dict).
    """
    config = config or SweepConfig()
    rng = np.random.default_rng(config.seed)
    agg = pop.aggregates()
    days = day_bounds(agg)
    k = agg.cells.n_cells
    rec_cfg = RecoveryConfig(config.recovery.night_start, config.recovery.night_end, config.recovery.link,
                             pop.n_users)
    jobs: list[DefenceSpec] = [DefenceSpec(Defence.NONE)]
    for d in config.defences:
        if d in (Defence.THRESHOLD, Defence.BOUNDING):   # the rule alone, without noise
            jobs.append(DefenceSpec(d, math.inf, config.threshold, config.max_slots))
        jobs += [DefenceSpec(d, e, config.threshold, config.max_slots) for e in config.epsilons]
    t0 = time.perf_counter()
    rows, first = [], None
    for i, spec in enumerate(jobs):
        published = defend(pop, spec, rng)
        rec = recover(agg.with_counts(published), rec_cfg)
        s = score(rec, pop.sequences, k, days=days, ks=(1, 2, 3, 4, 5) if first is None else (2,))
        if first is None:
            first = s
        rows.append({"defence": spec.defence.value, "epsilon": None if spec.epsilon == math.inf else spec.epsilon,
                     "accuracy": round(s.accuracy, 4), "per_day_accuracy": round(float(np.mean(s.per_day)), 4),
                     "reidentified_top2": round(s.reidentified[2], 4)})
        if progress is not None:
            progress(i + 1, len(jobs), f"{spec.defence.value} ε={spec.epsilon:g}: accuracy {s.accuracy:.3f}")
    base = chance_accuracy(pop.sequences, k, rng, config.chance_reps)
    crossing = {}
    for d in config.defences:
        pts = [(r["epsilon"], r["accuracy"]) for r in rows if r["defence"] == d and r["epsilon"] is not None]
        crossing[d] = chance_epsilon([p[0] for p in pts], [p[1] for p in pts], base)
    return {"people": pop.n_users, "slots": agg.n_slots, "days": len(days), "cells": k,
            "slot_minutes": pop.report.get("slot_minutes"), "threshold": config.threshold,
            "max_slots": config.max_slots, "seed": config.seed, "chance": round(base, 4),
            "chance_tolerance": CHANCE_TOLERANCE, "chance_epsilon": crossing, "no_defence": first.to_dict(),
            "rows": rows, "seconds": round(time.perf_counter() - t0, 1), "population": pop.report}
