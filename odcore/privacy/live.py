"""Curves tabulated on a grid of ε, for a browser that draws them at any ε in between while a slider is dragged.

A table is ``values[i, j]``: a curve's value at ``grid[i]`` (an ε) and ``x[j]`` (k, n or weeks). Between two grid
points the browser interpolates linearly, either in (ε, value) (``"lin"``: probabilities) or in (log ε, log value)
(``"loglog"``: budgets that grow like a power of ε). :func:`interpolate` is the same arithmetic in Python: the
tests compare it with the exact engine at ε between the grid points.

Grids and their error (``tests/odcore/privacy/test_live_tables.py`` measures it at the midpoints, where linear interpolation is
worst, and at random ε):

- :data:`ATTACK_GRID`, 90 ε log-spaced over [0.05, 5], ``"lin"``: p_k within 0.1 percentage point (measured
  ≤ 0.015).
- :data:`BUDGET_GRID`, 60 ε log-spaced, ``"loglog"``: tight ε of a user-week within 0.5 % of the exact value,
  against n and against δ.
- :data:`WEEKS_GRID`, 24 ε log-spaced, ``"loglog"``: tight ε over weeks within 0.5 % (each point composes up to
  W·n Laplace mechanisms, ~0.3 s; a coarser grid in log-log is as accurate as a finer one in ε). The tight values are
  the upper end of a PLD bracket whose loss-grid step is a fixed share of ε
  (:data:`odcore.privacy.accounting.WEEKS_RELATIVE_STEP`): with one step for every ε the upper end jumps between grid
  points and no grid reads it within 0.5 % (5.4 % at 10 trips, 104 weeks, δ 1e-9).

Closed forms (basic and advanced composition, the posterior bound, e^ε/(1+e^ε)) are not tabulated: the browser
computes them exactly (``odapp/components/live/live.js``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from odcore.errors import ParameterError
from odcore.privacy import accounting as acc
from odcore.privacy import attack, pld, pld_weeks
from odcore.privacy.attack import success_grid

EPSILON_SPAN = (0.05, 5.0)   # the ε slider's range (odapp.shared.state.EPSILON_RANGE)
ATTACK_GRID = np.geomspace(*EPSILON_SPAN, 90)
BUDGET_GRID = np.geomspace(*EPSILON_SPAN, 60)
WEEKS_GRID = np.geomspace(*EPSILON_SPAN, 24)
ATTACK_ERROR = 1e-3       # absolute (0.1 percentage point)
PERSON_RESOLUTION = 64    # loss-grid points per ε of a person's table: within 1e-5 of user_risk's default (256),
                          # measured; 3× less work on every threshold the page is given
BUDGET_ERROR = 5e-3       # relative (0.5 %)
INTERPOLATIONS = ("lin", "loglog")


@dataclass(frozen=True)
class LiveTable:
    """One curve on a grid of ε: ``values[i, j]`` at ε = ``grid[i]`` and ``x[j]``; ``interp`` says how to read
    between grid rows ("lin" or "loglog")."""

    grid: np.ndarray
    x: np.ndarray
    values: np.ndarray
    interp: str = "lin"

    def __post_init__(self) -> None:
        if self.interp not in INTERPOLATIONS:
            raise ParameterError(f"interp must be one of {INTERPOLATIONS}, got interp={self.interp!r}.")
        if self.values.shape != (len(self.grid), len(self.x)):
            raise ParameterError(f"values must have shape (len(grid), len(x)) = ({len(self.grid)}, {len(self.x)}), "
                                 f"got {self.values.shape}.")

    def at(self, epsilon: float) -> np.ndarray:
        """The curve at ``epsilon`` as the browser draws it (:func:`interpolate`)."""
        return interpolate(self.grid, self.values, epsilon, self.interp)

    def to_json(self) -> dict:
        """Plain lists for the browser: values rounded to 7 decimals, None where the engine has none (NaN: JSON
        has no NaN; the tight ε above :data:`odcore.privacy.accounting.TIGHT_K_MAX`)."""
        v = np.round(self.values.astype(float), 7)
        return {"grid": [float(g) for g in self.grid], "x": [float(x) for x in self.x],
                "values": [[float(y) if np.isfinite(y) else None for y in row] for row in v],
                "interp": self.interp}


def interpolate(grid: np.ndarray, values: np.ndarray, epsilon: float, interp: str = "lin") -> np.ndarray:
    """Row of ``values`` at ``epsilon`` between the two grid rows around it (clamped at the ends).

    Examples
    --------
    >>> interpolate(np.array([1.0, 2.0]), np.array([[1.0], [3.0]]), 1.5)
    array([2.])
    >>> round(float(interpolate(np.array([1.0, 4.0]), np.array([[1.0], [16.0]]), 2.0, "loglog")[0]), 9)
    4.0
    """
    g = np.asarray(grid, dtype=float)
    e = min(max(float(epsilon), g[0]), g[-1])
    i = int(np.clip(np.searchsorted(g, e) - 1, 0, len(g) - 2))
    lo, hi = values[i].astype(float), values[i + 1].astype(float)
    if interp == "loglog":
        t = (np.log(e) - np.log(g[i])) / (np.log(g[i + 1]) - np.log(g[i]))
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.exp(np.log(lo) * (1 - t) + np.log(hi) * t)
        return np.where((lo > 0) & (hi > 0), out, lo * (1 - t) + hi * t)
    t = (e - g[i]) / (g[i + 1] - g[i])
    return lo * (1 - t) + hi * t


# ---- Attack: p_k against k ------------------------------------------------------------------------------------------

def attack_tables(k_max: int, max_pairs: int | None = None) -> dict[str, LiveTable]:
    """The Attack page's curves on :data:`ATTACK_GRID`: ``success`` (p_k per count, 50/50 prior) and
    ``success_per_person`` (the bounded release, ``max_pairs`` given), k = 0..k_max.

    Houssiau et al. 2022, Fig. 1 (exact values: :func:`odcore.privacy.attack.success_curve`)."""
    k = np.arange(int(k_max) + 1)
    out = {"success": LiveTable(ATTACK_GRID, k, np.array([attack.success_curve(float(e), int(k_max))
                                                          for e in ATTACK_GRID]))}
    if max_pairs is not None:
        out["success_per_person"] = LiveTable(ATTACK_GRID, k, np.array(
            [attack.bounded_success_curve(float(e), int(max_pairs), int(k_max)) for e in ATTACK_GRID]))
    return out


# ---- Privacy budget: ε of a user-week against n, and over weeks -------------------------------------------------

def trips_tables(trips_max: int, delta: float, max_pairs: int | None = None) -> dict[str, LiveTable]:
    """ε of one user-week against n = 1..trips_max on :data:`BUDGET_GRID`: ``tight`` (exact PLD, NaN above
    :data:`odcore.privacy.accounting.TIGHT_K_MAX`), ``rdp`` and, with ``max_pairs``, ``person_tight`` (the
    min(n, m)-fold Laplace(ε/m) composition). Same numbers as :func:`odcore.privacy.accounting.epsilon_vs_trips`."""
    n = np.arange(1, int(trips_max) + 1)
    rows = [acc.epsilon_vs_trips(float(e), int(trips_max), delta) for e in BUDGET_GRID]
    out = {c: LiveTable(BUDGET_GRID, n, np.array([r[c].to_numpy(dtype=float) for r in rows]), "loglog")
           for c in ("tight", "rdp")}
    if max_pairs is not None:
        m = int(max_pairs)
        out["person_tight"] = LiveTable(BUDGET_GRID, n, np.array(
            [np.asarray(pld.epsilon_for_delta(delta, np.minimum(n, m), float(e) / m), dtype=float)
             for e in BUDGET_GRID]), "loglog")
    return out


def weeks_tables(trips: int, weeks: int, delta: float, relative_step: float | None = None,
                 max_pairs: int | None = None) -> dict[str, LiveTable]:
    """Cumulative ε over 1..weeks weekly releases of ``trips`` trips on :data:`WEEKS_GRID`: ``tight`` (upper end of
    the PLD bracket with loss-grid step ``relative_step·ε`` at each ε, as on the page; default
    :data:`odcore.privacy.accounting.WEEKS_RELATIVE_STEP`), ``rdp`` and, with ``max_pairs``, ``person_tight`` (step
    :func:`odcore.privacy.accounting.person_weeks_interval`). Same numbers as
    :func:`odcore.privacy.accounting.epsilon_over_weeks` with ``interval=weeks_interval(ε, relative_step)``.

    The step follows ε so that the tabulated upper end is smooth in ε: with one step for every ε it jumps between
    grid points by up to ``w·step`` (:data:`odcore.privacy.accounting.WEEKS_RELATIVE_STEP`)."""
    rel = acc.WEEKS_RELATIVE_STEP if relative_step is None else float(relative_step)
    w = np.arange(1, int(weeks) + 1)
    rows = [acc.epsilon_over_weeks(float(e), int(trips), int(weeks), delta, interval=acc.weeks_interval(float(e), rel),
                                   lower=False)
            for e in WEEKS_GRID]
    out = {c: LiveTable(WEEKS_GRID, w, np.array([r[c].to_numpy(dtype=float) for r in rows]), "loglog")
           for c in ("tight", "rdp")}
    if max_pairs is not None:
        m = int(max_pairs)
        vals = []
        for e in WEEKS_GRID:
            step = acc.person_weeks_interval(float(e), int(weeks))
            _, hi = pld_weeks.composed_epsilon_curve(delta, m, float(e) / m, w, interval=step)
            vals.append(np.minimum(hi, w * float(e)))
        out["person_tight"] = LiveTable(WEEKS_GRID, w, np.array(vals), "loglog")
    return out


def delta_tables(trips: int, deltas=None) -> dict[str, LiveTable]:
    """ε of one user-week of ``trips`` counts against δ on :data:`BUDGET_GRID`: ``tight`` (exact PLD, NaN above
    :data:`odcore.privacy.accounting.TIGHT_K_MAX`) and ``rdp``, at the δ of
    :func:`odcore.privacy.accounting.epsilon_delta_curve` (its default: 40 log-spaced from 1e-30 to 0.5). Same
    numbers as that function; basic and advanced composition are closed forms the browser computes."""
    rows = [acc.epsilon_delta_curve(float(e), int(trips), deltas) for e in BUDGET_GRID]
    x = rows[0]["delta"].to_numpy(dtype=float)
    return {c: LiveTable(BUDGET_GRID, x, np.array([r[c].to_numpy(dtype=float) for r in rows]), "loglog")
            for c in ("tight", "rdp")}


# ---- OD release: the counts published, with coherent noise ---------------------------------------------------------

DRAWS_CAP = 3000
"""Unit draws kept per true count (the largest): the browser's published count is exact while fewer pairs of one
count are published, else it says "≥"."""


def coherent_draws(true_count, noise, scale: float, sensitivity: float, cap: int = DRAWS_CAP) -> dict:
    """Each pair's unit-Laplace draw ``u = noise / scale`` grouped by true count, largest first, for the browser.

    The release draws ``noise = rng.laplace(0, scale)`` (:func:`odcore.privacy.release.release`), which is
    ``scale · u`` with ``u`` a unit-Laplace draw that does not depend on ε or the threshold. So at any ε the same seed
    publishes pair i iff ``c_i + (sensitivity/ε)·u_i ≥ τ``: moving ε moves the noisy counts smoothly instead of
    redrawing them, and at the page's ε the browser's counts are the page's release.

    Returns ``{"c": [true counts], "n": [pairs with that count], "u": [[draws, largest first, at most cap]],
    "sensitivity": s}`` (pairs without a draw, e.g. not submitted, are left out).

    Examples
    --------
    >>> d = coherent_draws([1, 1, 5], [0.5, -1.0, 2.0], 0.5, 1.0)
    >>> d["c"], d["n"], d["u"]
    ([1.0, 5.0], [2, 1], [[1.0, -2.0], [4.0]])
    """
    c = np.asarray(true_count, dtype=float)
    u = np.asarray(noise, dtype=float) / float(scale)
    ok = np.isfinite(c) & np.isfinite(u)
    c, u = c[ok], u[ok]
    order = np.lexsort((-u, c))
    c, u = c[order], u[order]
    values, starts, counts = np.unique(c, return_index=True, return_counts=True)
    return {"c": [float(v) for v in values], "n": [int(n) for n in counts],
            "u": [np.round(u[s:s + min(n, cap)], 5).tolist() for s, n in zip(starts, counts, strict=True)],
            "sensitivity": float(sensitivity)}


def published_count(draws: dict, epsilon: float, threshold: float) -> int:
    """Pairs published at ``epsilon`` and ``threshold`` with the draws of :func:`coherent_draws` (what the browser
    counts; exact while below the cap)."""
    b = draws["sensitivity"] / float(epsilon)
    return int(sum(int(np.count_nonzero(np.asarray(u) >= (threshold - c) / b))
                   for c, u in zip(draws["c"], draws["u"], strict=True)))


# ---- Attack: one real person of the week ----------------------------------------------------------------------------

def person_success(others, max_pairs: int, thresholds) -> np.ndarray:
    """Attack success on one real person of the week at each ε of :data:`ATTACK_GRID`: the thresholded release with
    per-pair parameter ε/max_pairs (max_pairs = 1 per count) and threshold ``thresholds[i]`` at ``ATTACK_GRID[i]``
    (a number, or one per grid point when the threshold follows ε), at :data:`PERSON_RESOLUTION`.

    Exact values: those of :func:`odcore.privacy.attack.user_risk`, by :func:`~odcore.privacy.attack.success_grid`
    (``others``: the other people's counts on the person's pairs)."""
    tau = np.broadcast_to(np.asarray(thresholds, dtype=float), ATTACK_GRID.shape)
    return success_grid(list(others), ATTACK_GRID / int(max_pairs), tau, resolution=PERSON_RESOLUTION)
