"""The lab's defences applied to the counts per cell per slot before the attack reads them.

- ``laplace``: Laplace noise of scale 1/ε on every count (event-level: protects one person-slot, the
  ``lpa-event`` of Knock Knock's defences);
- ``threshold``: ``laplace`` then every noisy count below τ published as 0 (the lab's noise-then-threshold rule);
- ``bounding``: per-person contribution bounding — each person's records are kept in at most ``max_slots`` slots of
  the period (chosen at random), then Laplace of scale ``max_slots``/ε (user-level ε-DP for the period);
- ``lpa``, ``gsm``, ``fpa``, ``efpag``: Knock Knock's defences (:mod:`odcore.knock.defences`) on every cell's series
  with the user-level sensitivity Δ = the slots of the period (each person is in one cell per slot), clipped to
  ``[0, N]``.

The attack (:func:`odcore.recover.phases.recover`) turns whatever is published back into ``N`` location instances
per slot (:func:`odcore.recover.phases.repair_counts`); ``N`` is taken as known.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from odcore.errors import ParameterError, check_positive, coerce_enum
from odcore.knock.defences import DefenceConfig, perturb
from odcore.recover.aggregates import Population


class Defence(StrEnum):
    NONE = "none"
    LAPLACE = "laplace"
    THRESHOLD = "threshold"
    BOUNDING = "bounding"
    LPA = "lpa"
    GSM = "gsm"
    FPA = "fpa"
    EFPAG = "efpag"


KNOCK = (Defence.LPA, Defence.GSM, Defence.FPA, Defence.EFPAG)


@dataclass(frozen=True)
class DefenceSpec:
    """One defence at one ε (``epsilon=inf`` means no noise: the threshold or bounding alone)."""

    defence: Defence
    epsilon: float = math.inf
    threshold: float = 5.0
    max_slots: int = 24
    delta: float = 0.1
    kappa: int = 20

    def __post_init__(self) -> None:
        coerce_enum(self, "defence", Defence)
        if self.epsilon != math.inf:
            object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon))
        elif self.defence in (Defence.LAPLACE, *KNOCK):
            raise ParameterError(f"defence {self.defence.value!r} needs a finite epsilon > 0.")
        check_positive("threshold", self.threshold, allow_zero=True)
        if int(self.max_slots) != self.max_slots or self.max_slots < 1:
            raise ParameterError(f"max_slots must be an integer >= 1, got max_slots={self.max_slots!r}.")


def defend(pop: Population, spec: DefenceSpec, rng: np.random.Generator | int | None = None) -> np.ndarray:
    """The published ``slots × cells`` counts of ``pop`` under ``spec`` (fresh noise from ``rng``)."""
    rng = np.random.default_rng(rng)
    exact = pop.aggregates().counts
    d = spec.defence
    if d == Defence.NONE:
        return exact
    if d in (Defence.LAPLACE, Defence.THRESHOLD):
        out = exact if spec.epsilon == math.inf else exact + rng.laplace(0.0, 1.0 / spec.epsilon, exact.shape)
        if d == Defence.THRESHOLD:
            out = np.where(out >= spec.threshold, out, 0.0)
        return out
    if d == Defence.BOUNDING:
        n, t = pop.sequences.shape
        b = min(int(spec.max_slots), t)
        keep = np.argsort(rng.random((n, t)), axis=1)[:, :b]          # b random slots per person
        k = pop.cells.n_cells
        flat = (keep * k + np.take_along_axis(pop.sequences, keep, axis=1)).ravel()
        out = np.bincount(flat, minlength=t * k).reshape(t, k).astype(float)
        if spec.epsilon != math.inf:
            out += rng.laplace(0.0, b / spec.epsilon, out.shape)
        return out
    cfg = DefenceConfig(mechanism=d.value, epsilon=spec.epsilon, sensitivity=float(exact.shape[0]),
                        delta=spec.delta, kappa=spec.kappa)
    return perturb(exact.T, cfg, rng, group_size=pop.n_users).T
