"""Scoring a recovery against the true sequences (Xu et al. 2017, §5), and the chance baseline.

- **Accuracy**: recovered trajectories are matched one-to-one to true people by the assignment that maximises the
  number of slots where they agree (:func:`scipy.optimize.linear_sum_assignment` on ``M[r, u]`` = agreeing slots);
  accuracy = agreeing slots / (people × slots) under that matching, and per slot the fraction of matched pairs that
  agree in it. The authors' released ``computeAccuracy.py`` matches greedily (each true trace in turn takes the
  recovered one it agrees with most); :func:`greedy_accuracy` gives that too (never more than the optimum).
- **Per-day accuracy**: the same with each day matched separately (what phases 1–2 alone achieve).
- **Top-k uniqueness** (§5.3): a person's top-k cells are the ``k`` cells they occupy in most slots (ties to the
  lower cell id; fewer if they visit fewer). ``unique_true[k]``: share of people whose top-k set no one else has;
  ``reidentified[k]``: share of people whose top-k set is the top-k set of exactly one recovered trajectory, and
  that trajectory is the one matched to them.
- **Chance baseline**: the accuracy of a recovery that knows every true count but links nothing — each slot's true
  location instances dealt to the ``N`` trajectories in a uniformly random order — scored by the same optimal
  matching (its mean over ``reps`` draws).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment

from odcore.errors import ParameterError


def agreement(recovered: np.ndarray, truth: np.ndarray, n_cells: int) -> np.ndarray:
    """``M[r, u]`` = number of slots in which recovered trajectory ``r`` and person ``u`` are in the same cell."""
    if recovered.shape[1] != truth.shape[1]:
        raise ParameterError(f"recovered and true sequences cover different slots: {recovered.shape[1]} vs "
                             f"{truth.shape[1]}.")
    t = truth.shape[1]

    def onehot(x: np.ndarray) -> sp.csr_matrix:
        cols = (np.arange(t)[None, :] * n_cells + x).ravel()
        rows = np.repeat(np.arange(x.shape[0]), t)
        return sp.csr_matrix((np.ones(cols.size, np.float32), (rows, cols)), shape=(x.shape[0], t * n_cells))

    return (onehot(recovered) @ onehot(truth).T).toarray()


def best_matching(recovered: np.ndarray, truth: np.ndarray, n_cells: int) -> tuple[np.ndarray, np.ndarray]:
    """``(r, u)`` index pairs of the matching that maximises the agreeing slots."""
    return linear_sum_assignment(agreement(recovered, truth, n_cells), maximize=True)


def greedy_accuracy(recovered: np.ndarray, truth: np.ndarray, n_cells: int) -> float:
    """Accuracy under the greedy matching of the authors' released code (true traces in order)."""
    m = agreement(recovered, truth, n_cells)
    free = np.ones(m.shape[0], bool)
    total = 0.0
    for u in range(m.shape[1]):
        col = np.where(free, m[:, u], -1.0)
        r = int(np.argmax(col))
        if col[r] < 0:
            break
        free[r] = False
        total += col[r]
    return float(total / truth.size)


def top_k_sets(seq: np.ndarray, n_cells: int, k: int) -> list[frozenset]:
    """Each row's ``k`` most visited cells (ties to the lower cell id)."""
    n = seq.shape[0]
    hist = np.bincount((np.arange(n)[:, None] * n_cells + seq).ravel(), minlength=n * n_cells).reshape(n, n_cells)
    order = np.argsort(-hist, axis=1, kind="stable")[:, :k]
    return [frozenset(int(c) for c in row[hist[i, row] > 0]) for i, row in enumerate(order)]


@dataclass(frozen=True)
class Score:
    accuracy: float
    per_slot: np.ndarray
    per_day: list[float]
    greedy_accuracy: float
    unique_true: dict[int, float] = field(default_factory=dict)
    reidentified: dict[int, float] = field(default_factory=dict)
    matching: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))   # matching[u] = recovered row

    def to_dict(self) -> dict:
        return {"accuracy": round(self.accuracy, 4), "greedy_accuracy": round(self.greedy_accuracy, 4),
                "per_day_accuracy": [round(x, 4) for x in self.per_day],
                "per_slot_accuracy": [round(float(x), 4) for x in self.per_slot],
                "unique_true_top_k": {str(k): round(v, 4) for k, v in self.unique_true.items()},
                "reidentified_top_k": {str(k): round(v, 4) for k, v in self.reidentified.items()}}


def score(recovered: np.ndarray, truth: np.ndarray, n_cells: int, *, days: list[tuple[int, int]] | None = None,
          ks: tuple[int, ...] = (1, 2, 3, 4, 5)) -> Score:
    """Score ``recovered`` (``N × T``) against ``truth`` (``N × T``); see the module docstring."""
    recovered = np.asarray(recovered, dtype=np.int64)
    truth = np.asarray(truth, dtype=np.int64)
    if recovered.shape != truth.shape:
        raise ParameterError(f"recovered sequences are {recovered.shape[0]} × {recovered.shape[1]} slots, the true "
                             f"ones {truth.shape[0]} × {truth.shape[1]}; the attack must recover one trajectory "
                             "per person over the same slots.")
    r, u = best_matching(recovered, truth, n_cells)
    matching = np.empty(truth.shape[0], dtype=np.int64)
    matching[u] = r
    agree = recovered[matching] == truth
    per_day = []
    for t0, t1 in days or [(0, truth.shape[1])]:
        rr, uu = best_matching(recovered[:, t0:t1], truth[:, t0:t1], n_cells)
        per_day.append(float((recovered[rr, t0:t1] == truth[uu, t0:t1]).mean()))
    unique_true, reid = {}, {}
    for k in ks:
        true_sets = top_k_sets(truth, n_cells, k)
        rec_sets = top_k_sets(recovered, n_cells, k)
        n_true: dict[frozenset, int] = {}
        for s in true_sets:
            n_true[s] = n_true.get(s, 0) + 1
        rec_index: dict[frozenset, list[int]] = {}
        for i, s in enumerate(rec_sets):
            rec_index.setdefault(s, []).append(i)
        unique_true[k] = float(np.mean([n_true[s] == 1 for s in true_sets]))
        reid[k] = float(np.mean([rec_index.get(s, []) == [int(matching[p])] for p, s in enumerate(true_sets)]))
    return Score(float(agree.mean()), agree.mean(axis=0), per_day, greedy_accuracy(recovered, truth, n_cells),
                 unique_true, reid, matching)


def chance_accuracy(truth: np.ndarray, n_cells: int, rng: np.random.Generator | int | None = None,
                    reps: int = 3) -> float:
    """Mean accuracy of the random-linking recovery over ``reps`` draws (see the module docstring)."""
    rng = np.random.default_rng(rng)
    truth = np.asarray(truth, dtype=np.int64)
    out = []
    for _ in range(int(reps)):
        shuffled = rng.permuted(truth, axis=0)
        r, u = best_matching(shuffled, truth, n_cells)
        out.append(float((shuffled[r] == truth[u]).mean()))
    return float(np.mean(out))
