"""The three phases of Xu et al. 2017, "Trajectory Recovery From Ash" (WWW'17), each an assignment problem.

From counts per cell per slot, the attack builds ``N`` trajectories (``N`` = people in every slot):

1. **Night** (§4.1, slots whose local start is in ``[night_start, night_end)``, default 00:00–06:00): people barely
   move, so each trajectory continues to the location instance nearest its last location. Cost
   ``C[i, j] = d(l_i(t-1), p_j(t))``.
2. **Day** (§4.2, the other slots of a day): each trajectory's next location is predicted from its velocity,
   ``l̂_i(t) = l_i(t-1) + (l_i(t-1) − l_i(t-2))``, and ``C[i, j] = d(l̂_i(t), p_j(t))``.
3. **Linking across days** (§4.3): the day-long pieces of day ``d+1`` are attached to the trajectories built so far
   by the *information gain* of merging them, ``G(a, b) = H(a ∪ b) − (H(a) + H(b)) / 2``, where ``H`` is the Shannon
   entropy of the visited-cell frequencies (regular people revisit the same cells, so their own pieces merge with
   little gain).

Each step solves ``min Σ C[i, σ(i)]`` over the permutations σ with the Hungarian method
(:func:`scipy.optimize.linear_sum_assignment`). ``p_j(t)``, the *location instances* of slot ``t``, list every cell
as many times as its count; a count that is not a non-negative integer summing to ``N`` (a noisy release) is first
turned into one by :func:`repair_counts`. Days are split where the local start time of a slot wraps past midnight.

References
----------
Xu, Tu, Li, Zhang, Fu, Jin (2017), "Trajectory Recovery From Ash: User Privacy Is NOT Preserved in Aggregated
Mobility Data", WWW'17, §4.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np
from scipy.optimize import linear_sum_assignment

from odcore.errors import ParameterError
from odcore.recover.aggregates import Aggregates


@dataclass(frozen=True)
class RecoveryConfig:
    """Parameters of the attack.

    Parameters
    ----------
    night_start, night_end:
        Local minutes of the day bounding the night phase, ``[night_start, night_end)`` (Xu et al.: 0–6 h).
    link:
        Link days by information gain (phase 3); without it each day's pieces are kept in the order of slot 0's
        instances (for the per-day measures).
    n_people:
        ``N``, the number of trajectories; default: the median over slots of the rounded total count.
    """

    night_start: int = 0
    night_end: int = 360
    link: bool = True
    n_people: int | None = None

    def __post_init__(self) -> None:
        for name in ("night_start", "night_end"):
            v = getattr(self, name)
            if int(v) != v or not 0 <= v <= 1440:
                raise ParameterError(f"{name} must be a minute of the day in [0, 1440], got {name}={v!r}.")
        if self.night_start > self.night_end:
            raise ParameterError(f"night_start must be <= night_end, got night_start={self.night_start}, "
                                 f"night_end={self.night_end}.")
        if self.n_people is not None and (int(self.n_people) != self.n_people or self.n_people < 1):
            raise ParameterError(f"n_people must be an integer >= 1, got n_people={self.n_people!r}.")


def repair_counts(row: np.ndarray, n: int) -> np.ndarray:
    """Integer counts ``>= 0`` summing to ``n`` closest in proportion to ``row`` (negatives read as 0; largest
    remainders, ties to the lower cell; all zero: spread evenly).

    >>> repair_counts(np.array([2.6, -1.0, 1.2]), 4).tolist()
    [3, 0, 1]
    """
    x = np.clip(np.asarray(row, dtype=float), 0.0, None)
    total = x.sum()
    if total <= 0:
        x = np.ones_like(x)
        total = x.sum()
    q = x * (n / total)
    out = np.floor(q).astype(np.int64)
    rest = int(n - out.sum())
    if rest > 0:
        frac = q - out
        order = np.lexsort((np.arange(frac.size), -frac))
        out[order[:rest]] += 1
    return out


def instances(row: np.ndarray, n: int) -> np.ndarray:
    """The slot's location instances: every cell repeated by its (repaired) count, ``n`` in all, sorted."""
    c = np.asarray(row)
    if not (np.all(c >= 0) and np.all(c == np.round(c)) and int(c.sum()) == n):
        c = repair_counts(c, n)
    return np.repeat(np.arange(c.size), c.astype(np.int64))


def night_cost(last_xy: np.ndarray, cand_xy: np.ndarray) -> np.ndarray:
    """``C[i, j]`` = distance from trajectory ``i``'s last location to instance ``j`` (Xu et al. §4.1)."""
    d = last_xy[:, None, :] - cand_xy[None, :, :]
    return np.sqrt((d * d).sum(-1))


def day_cost(last_xy: np.ndarray, before_xy: np.ndarray, cand_xy: np.ndarray) -> np.ndarray:
    """``C[i, j]`` = distance from the velocity prediction ``2·l(t-1) − l(t-2)`` to instance ``j`` (§4.2)."""
    return night_cost(2.0 * last_xy - before_xy, cand_xy)


def entropy(hist: np.ndarray) -> np.ndarray:
    """Shannon entropy (nats) of each row of visit counts."""
    h = np.asarray(hist, dtype=float)
    n = h.sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        xlogx = np.where(h > 0, h * np.log(np.where(h > 0, h, 1.0)), 0.0).sum(-1)
        return np.where(n > 0, np.log(np.where(n > 0, n, 1.0)) - xlogx / np.where(n > 0, n, 1.0), 0.0)


def _xlogx(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > 0, x * np.log(np.where(x > 0, x, 1.0)), 0.0)


def link_cost(hist_a: np.ndarray, hist_b: np.ndarray) -> np.ndarray:
    """``G[i, j] = H(a_i ∪ b_j) − (H(a_i) + H(b_j)) / 2`` for visit-count rows ``a_i``, ``b_j`` (§4.3).

    With ``f(x) = x·log x`` and ``n`` the merged length, ``H(a ∪ b) = log n − Σ_c f(a_c + b_c) / n``, and
    ``Σ_c f(a_c + b_c) = Σ f(a_c) + Σ f(b_c) + Σ_{c: a_c, b_c > 0} [f(a_c + b_c) − f(a_c) − f(b_c)]``: only the
    cells both visit need the merged value, so the cost is one pass per cell over the pieces that visit it.
    """
    a = np.asarray(hist_a, dtype=float)
    b = np.asarray(hist_b, dtype=float)
    s = _xlogx(a).sum(1)[:, None] + _xlogx(b).sum(1)[None, :]
    for c in np.flatnonzero(b.sum(0) > 0):
        js = np.flatnonzero(b[:, c] > 0)
        x = a[:, c][:, None]
        y = b[js, c][None, :]
        s[:, js] += _xlogx(x + y) - _xlogx(x) - _xlogx(y)
    n = a.sum(1)[:, None] + b.sum(1)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        merged = np.where(n > 0, np.log(np.where(n > 0, n, 1.0)) - s / np.where(n > 0, n, 1.0), 0.0)
    return merged - (entropy(a)[:, None] + entropy(b)[None, :]) / 2.0


def day_bounds(agg: Aggregates) -> list[tuple[int, int]]:
    """``[t0, t1)`` of each day: a new day starts where the slots' local start time wraps past midnight."""
    m = agg.minute_of_day()
    cuts = [0, *(np.flatnonzero(m[1:] <= m[:-1]) + 1).tolist(), agg.n_slots]
    return [(a, b) for a, b in pairwise(cuts) if b > a]


def people(agg: Aggregates, config: RecoveryConfig) -> int:
    if config.n_people is not None:
        return int(config.n_people)
    n = int(np.median(np.rint(np.clip(agg.counts, 0, None).sum(axis=1))))
    if n < 1:
        raise ParameterError("the counts hold no one (every slot sums to 0 or less); nothing to recover.")
    return n


def recover_day(inst: list[np.ndarray], xy: np.ndarray, night: np.ndarray) -> np.ndarray:
    """Phases 1 and 2 over one day: ``inst[t]`` the instances of slot ``t``, ``night[t]`` whether slot ``t`` is in
    the night phase. Returns ``N × S`` cells; trajectory ``i`` starts at ``inst[0][i]``."""
    n, s = inst[0].size, len(inst)
    traj = np.empty((n, s), dtype=np.int64)
    traj[:, 0] = inst[0]
    for t in range(1, s):
        last = xy[traj[:, t - 1]]
        cand = xy[inst[t]]
        if night[t]:
            cost = night_cost(last, cand)
        else:
            before = xy[traj[:, t - 2]] if t >= 2 else last
            cost = day_cost(last, before, cand)
        rows, cols = linear_sum_assignment(cost)
        traj[rows, t] = inst[t][cols]
    return traj


def visit_counts(traj: np.ndarray, n_cells: int) -> np.ndarray:
    """``N × n_cells`` visit counts of each trajectory."""
    n = traj.shape[0]
    flat = (np.arange(n)[:, None] * n_cells + traj).ravel()
    return np.bincount(flat, minlength=n * n_cells).reshape(n, n_cells)


def link_days(days: list[np.ndarray], n_cells: int) -> np.ndarray:
    """Phase 3: attach each day's pieces to the trajectories of the days before, by information gain."""
    acc = days[0]
    hist = visit_counts(acc, n_cells)
    for piece in days[1:]:
        h_new = visit_counts(piece, n_cells)
        rows, cols = linear_sum_assignment(link_cost(hist, h_new))
        order = np.empty(acc.shape[0], dtype=np.int64)
        order[rows] = cols
        acc = np.concatenate([acc, piece[order]], axis=1)
        hist = hist + h_new[order]
    return acc


def recover(agg: Aggregates, config: RecoveryConfig | None = None) -> np.ndarray:
    """Recover ``N × n_slots`` cell sequences from ``agg`` (Xu et al. 2017, §4); see the module docstring."""
    config = config or RecoveryConfig()
    n = people(agg, config)
    xy = agg.cells.xy_km()
    minute = agg.minute_of_day()
    night = (minute >= config.night_start) & (minute < config.night_end)
    days = []
    for t0, t1 in day_bounds(agg):
        inst = [instances(agg.counts[t], n) for t in range(t0, t1)]
        days.append(recover_day(inst, xy, night[t0:t1]))
    if config.link:
        return link_days(days, agg.cells.n_cells)
    return np.concatenate(days, axis=1)
