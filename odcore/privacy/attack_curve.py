"""The membership attack of Houssiau et al. 2022 in closed form: numpy only, what ``attack-curve`` needs.

Model (Houssiau et al. 2022, Methods, "Performing the attack"): the attacker knows every record but the victim's and
the victim's ``k`` unique weekly trips. Subtracting the known counts leaves ``k`` coordinates, each
``Lap(0, 1/ε)`` (victim out) or ``Lap(1, 1/ε)`` (victim in); a likelihood-ratio test decides.

- :func:`success_curve`: the exact success ``p_k`` of the optimal attacker (equal priors) for ``k = 0..k_max``
  (``½ + ½·TV``, via :mod:`odcore.privacy.pld`; the paper's Fig. 1 reports Monte Carlo estimates of it);
  :func:`user_level_success_curve` the same against the per-person (contribution-bounded) release.
- :func:`simulate_attack`: the paper's Monte Carlo (noise drawn, LLR computed, decision taken), vectorised, with
  Wilson intervals; LLR ties (possible with positive probability: the per-coordinate LLR has atoms at ±ε) are
  detected exactly and broken by a fair coin.
- :func:`bayes_success`, :func:`posterior_bound`: priors other than ½ (Methods, "Theoretical bounds").
- :func:`roc_plain`, :func:`tpr_at_fpr`: the attacker's full ROC curve (TPR at each FPR).

The attack against a thresholded release, per person and per week (pandas, scipy), is :mod:`odcore.privacy.attack`.

References
----------
Houssiau, Rocher, de Montjoye (2022), Nature Communications 13:29 — Methods, Fig. 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np

from odcore.errors import ParameterError, check_int, check_max_pairs, check_positive
from odcore.privacy import pld


def check_k_max(k_max) -> int:
    k = check_int("k_max", k_max)
    if k > 2000:
        raise ParameterError(f"k_max must be <= 2000, got k_max={k_max!r}.")
    return k


def check_prior(prior) -> float:
    try:
        p = float(prior)
    except (TypeError, ValueError):
        raise ParameterError(f"prior must be a probability in (0, 1), got prior={prior!r}.") from None
    if not (0.0 < p < 1.0):
        raise ParameterError(f"prior must be a probability in (0, 1), got prior={prior!r}.")
    return p


# ---------------------------------------------------------------------------------------------------------------
# Exact curve, priors
# ---------------------------------------------------------------------------------------------------------------

def success_curve(epsilon: float, k_max: int) -> np.ndarray:
    """Exact success ``p_k`` of the optimal membership attack, equal priors, for ``k = 0..k_max``.

    ``p_k = ½ + ½·TV(Lap(0,1/ε)^k, Lap(1,1/ε)^k)`` (Le Cam); Houssiau et al. 2022, Fig. 1 plots Monte Carlo
    estimates (p_3 = 70.5 %, p_32 = 95.4 % at ε = 0.66; exact: 70.71 %, 95.52 %).

    Returns
    -------
    numpy.ndarray, shape ``(k_max + 1,)``.

    Examples
    --------
    >>> [round(float(p), 4) for p in success_curve(0.66, 3)]
    [0.5, 0.6405, 0.6563, 0.7071]
    """
    km = check_k_max(k_max)
    return cached_success_curve(float(epsilon), km).copy()


@lru_cache(maxsize=256)
def cached_success_curve(epsilon: float, k_max: int) -> np.ndarray:
    """:func:`success_curve`, remembered per (ε, k_max) (read-only): every user's effective k reads it."""
    out = np.asarray(pld.optimal_accuracy(np.arange(k_max + 1), epsilon), dtype=float).reshape(k_max + 1)
    out.setflags(write=False)
    return out


def user_level_success_curve(epsilon: float, max_pairs: int, n_max: int) -> np.ndarray:
    """Success of the best membership attacker against the contribution-bounded (per-person) release, n = 0..n_max.

    Neighbouring relation: one person in or out. With contribution bounding a person's week adds 1 to
    ``min(n, m)`` counts (their kept pairs), each with Laplace noise of scale ``m/ε`` (parameter ε/m). The attacker
    of Houssiau et al. knows everyone else's data and all n of the person's trips, and (worst case for the person)
    which ``min(n, m)`` pairs were kept; the best test then has success ``½ + ½·TV`` of the ``min(n, m)``-fold
    Laplace(ε/m) pair, computed exactly (:func:`odcore.privacy.pld.optimal_accuracy`). The curve grows with n and is
    **flat from n = m on**: trips beyond m add nothing.

    Examples
    --------
    >>> c = user_level_success_curve(0.66, 20, 40)
    >>> round(float(c[20]), 4) == round(float(c[40]), 4)
    True
    """
    m = check_max_pairs(max_pairs)
    km = check_k_max(n_max)
    n = np.minimum(np.arange(km + 1), m)
    return np.asarray(pld.optimal_accuracy(n, float(epsilon) / m), dtype=float).reshape(km + 1)


def posterior_bound(epsilon: float, prior: float = 0.5) -> float:
    """Largest posterior ``P(in | output)`` an ε-DP mechanism allows from prior π: ``π e^ε / (π e^ε + 1 − π)``.

    Houssiau et al. 2022, Methods, "Theoretical bounds" (π = ½ gives ``e^ε/(1 + e^ε)``, the 65.9 % of
    Bassolas et al. at ε = 0.66). For ``k`` trips under basic composition pass ``k·ε``.

    Examples
    --------
    >>> round(posterior_bound(0.66), 3)
    0.659
    """
    eps = check_positive("epsilon", epsilon)
    p = check_prior(prior)
    # written with exp(-ε) to stay finite for large ε
    return p / (p + (1.0 - p) * math.exp(-eps))


def bayes_success(k, epsilon: float, prior: float = 0.5):
    """Success of the Bayes-optimal attacker when the victim is in with prior probability π.

    ``P(correct) = Σ max(π·q, (1−π)·p) = (1 − π) + π·δ(log((1−π)/π))`` with ``δ`` the hockey-stick divergence of
    :func:`odcore.privacy.pld.hockey_stick_delta` (symmetric pair). Never below ``max(π, 1 − π)`` (always guessing the
    likelier side); equals :func:`success_curve` at π = ½.

    Examples
    --------
    >>> round(float(bayes_success(3, 0.66, 0.5)), 4)
    0.7071
    """
    p = check_prior(prior)
    d = pld.hockey_stick_delta(math.log((1.0 - p) / p), k, epsilon)
    return (1.0 - p) + p * d


# ---------------------------------------------------------------------------------------------------------------
# Monte Carlo, as the paper ran it
# ---------------------------------------------------------------------------------------------------------------

def wilson_interval(successes, n, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for a binomial proportion (vectorised)."""
    if not (0.0 < float(confidence) < 1.0):
        raise ParameterError(f"confidence must be in (0, 1), got confidence={confidence!r}.")
    s = np.asarray(successes, dtype=float)
    n = np.asarray(n, dtype=float)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)   # the normal quantile (Wichura's AS241, ~1e-16)
    phat = s / n
    denom = 1.0 + z * z / n
    centre = (phat + z * z / (2 * n)) / denom
    half = z * np.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / denom
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


@dataclass(frozen=True)
class SimulationResult:
    """Monte Carlo estimate of the attack's success per k (fields are arrays aligned with ``k``)."""

    epsilon: float
    reps: int
    k: np.ndarray
    success: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    ties: np.ndarray  # number of exact LLR ties (broken by a fair coin)
    confidence: float = 0.95

    def to_dict(self) -> dict:
        return {"epsilon": self.epsilon, "reps": self.reps, "confidence": self.confidence,
                "k": self.k.tolist(), "success": self.success.tolist(), "ci_low": self.ci_low.tolist(),
                "ci_high": self.ci_high.tolist(), "ties": self.ties.tolist()}


def simulate_attack(epsilon: float, k_values, reps: int = 10_000, rng=None,
                    confidence: float = 0.95) -> SimulationResult:
    """The paper's Monte Carlo: draw membership and noise, compute the LLR, decide; repeat ``reps`` times per k.

    Houssiau et al. 2022, Methods, "Performing the attack": for each repetition the victim is in or out with
    probability ½, the attacker sees ``A(u)·[in] + Lap(0, 1/ε)`` on the victim's ``k`` trips and runs the
    likelihood-ratio test between ``L(0, 1/ε)`` and ``L(A(u), 1/ε)``.

    Ties: the per-coordinate LLR ``ε(|y| − |y − 1|)`` equals exactly ``−ε`` for ``y <= 0`` and ``+ε`` for
    ``y >= 1``; the LLR is computed in units of ε as ``2·Σ clip(y, 0, 1) − k`` where atoms contribute the exact
    integers 0 and 1, so a sum of atoms that cancels (e.g. k = 2, one coordinate each side) is an exact tie,
    broken by a fair coin (floating-point sums of ±ε would make it a coin toss on rounding errors).

    Parameters
    ----------
    epsilon:
        Laplace parameter ε > 0.
    k_values:
        Iterable of non-negative integers.
    reps:
        Repetitions per k (the paper: 10,000).
    rng:
        ``numpy.random.Generator | int | None``.
    confidence:
        Level of the Wilson interval.
    """
    eps = check_positive("epsilon", epsilon)
    ks = np.atleast_1d(np.asarray(k_values))
    try:
        kf = ks.astype(float)
    except (TypeError, ValueError):
        raise ParameterError(f"k_values must be non-negative integers, got {k_values!r}.") from None
    if ks.dtype == bool or np.any(~np.isfinite(kf)) or np.any(kf < 0) or np.any(kf != np.round(kf)):
        raise ParameterError(f"k_values must be non-negative integers, got {k_values!r}.")
    ks = kf.astype(np.int64)
    if isinstance(reps, bool) or not float(reps).is_integer() or int(reps) < 1:
        raise ParameterError(f"reps must be an integer >= 1, got reps={reps!r}.")
    reps = int(reps)
    rng = np.random.default_rng(rng)
    scale = 1.0 / eps
    succ = np.zeros(ks.size, dtype=np.int64)
    ties = np.zeros(ks.size, dtype=np.int64)
    chunk_cells = 4_000_000
    for i, k in enumerate(ks):
        rows = max(1, chunk_cells // max(int(k), 1))
        done = 0
        while done < reps:
            n = min(rows, reps - done)
            member = rng.random(n) < 0.5
            y = rng.laplace(0.0, scale, size=(n, int(k))) + member[:, None]
            c = np.clip(y, 0.0, 1.0)
            # LLR(in vs out) / ε = Σ (|y| − |y − 1|) = Σ (2c − 1) = 2·Σc − k; atoms contribute exact 0 / 1
            s2 = 2.0 * c.sum(axis=1) - k
            all_atoms = np.all((c == 0.0) | (c == 1.0), axis=1)
            tie = (s2 == 0.0) | (all_atoms & (np.rint(s2) == 0.0))
            coin = rng.random(n) < 0.5
            decide_in = np.where(tie, coin, s2 > 0.0)
            succ[i] += int(np.sum(decide_in == member))
            ties[i] += int(np.sum(tie))
            done += n
    lo, hi = wilson_interval(succ, reps, confidence)
    return SimulationResult(eps, reps, ks, succ / reps, lo, hi, ties, float(confidence))


# ---------------------------------------------------------------------------------------------------------------
# ROC of the plain k-fold attacker
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ROC:
    """Receiver operating characteristic of the optimal (likelihood-ratio) attacker.

    ``fpr``/``tpr`` are increasing arrays starting at (0, 0) and ending at (1, 1); between points the curve is
    linear (randomised tests).
    """

    fpr: np.ndarray
    tpr: np.ndarray

    @property
    def auc(self) -> float:
        return float(np.trapezoid(self.tpr, self.fpr))

    def tpr_at(self, fpr) -> np.ndarray:
        return np.interp(np.asarray(fpr, dtype=float), self.fpr, self.tpr)

    def to_dict(self, max_points: int = 201) -> dict:
        idx = np.unique(np.linspace(0, self.fpr.size - 1, min(max_points, self.fpr.size)).round().astype(int))
        return {"fpr": self.fpr[idx].tolist(), "tpr": self.tpr[idx].tolist(), "auc": self.auc,
                "tpr_at_fpr_1pct": float(self.tpr_at(0.01)), "tpr_at_fpr_0.1pct": float(self.tpr_at(0.001))}


def _state(k: int, epsilon: float) -> pld.LaplaceKFold:
    *_, st = pld.iter_k_fold(k, epsilon)
    return st


def roc_plain(k: int, epsilon: float, n_points: int = 400) -> ROC:
    """ROC of the optimal test for ``k`` plain Laplace coordinates (exact points, linear in between).

    The test "declare in when ``T = Σ clip(y, 0, 1) > t``" is the likelihood-ratio test (the LLR is
    ``ε(2T − k)``); the curve is traced over ``t`` with both sides of every atom of ``T`` (integers) included, so
    the segments across atoms are the exact randomised tests; ``n_points`` points on the continuous parts.
    """
    kk = int(pld.check_k_array(k))
    eps = check_positive("epsilon", epsilon)
    if kk == 0:
        return ROC(np.array([0.0, 1.0]), np.array([0.0, 1.0]))
    st = _state(kk, eps)
    ints = np.arange(kk + 1, dtype=float)
    # k/2 is the LLR = 0 threshold (the equal-prior Bayes test, where TPR − FPR = TV)
    t = np.unique(np.concatenate([np.linspace(-0.5, kk + 0.5, n_points), ints - 1e-12, ints + 1e-12, ints,
                                  [kk / 2.0]]))
    p, q = st.tails(t[::-1])
    fpr = np.concatenate([[0.0], p, [1.0]])
    tpr = np.concatenate([[0.0], q, [1.0]])
    order = np.lexsort((tpr, fpr))
    return ROC(np.maximum.accumulate(fpr[order]), np.maximum.accumulate(tpr[order]))


def _check_fpr(fpr) -> np.ndarray:
    alphas = np.atleast_1d(np.asarray(fpr, dtype=float))
    if np.any(~np.isfinite(alphas)) or np.any((alphas < 0) | (alphas > 1)):
        raise ParameterError(f"fpr must be in [0, 1], got fpr={fpr!r}.")
    return alphas


def tpr_at_fpr(k: int, epsilon: float, fpr) -> np.ndarray:
    """Exact TPR of the most powerful test at false-positive rate(s) ``fpr`` (Neyman–Pearson, randomised at atoms).

    Solves ``P(T > t) = α`` for ``t`` by bisection (vectorised over α); if α falls in an atom of ``T`` the test
    is randomised there.
    """
    kk = int(pld.check_k_array(k))
    eps = check_positive("epsilon", epsilon)
    alphas = _check_fpr(fpr)
    if kk == 0:
        return alphas.copy()
    return _tpr_at(_state(kk, eps), alphas)


def tpr_curve(epsilon: float, k_max: int, fpr=(0.01, 0.001)) -> np.ndarray:
    """``TPR[k, j]`` of the optimal attacker at FPR ``fpr[j]`` for ``k = 0..k_max`` (one recursion for all k)."""
    km = check_k_max(k_max)
    eps = check_positive("epsilon", epsilon)
    alphas = _check_fpr(fpr)
    out = np.empty((km + 1, alphas.size))
    for st in pld.iter_k_fold(km, eps):
        out[st.k] = alphas if st.k == 0 else _tpr_at(st, alphas)
    return out


def _tpr_at(st: pld.LaplaceKFold, alphas: np.ndarray) -> np.ndarray:
    k = st.k
    a = np.clip(alphas, 0.0, 1.0)
    lo = np.full(a.shape, -1.0)            # P(T > lo) = 1 >= α
    hi = np.full(a.shape, float(k) + 1.0)  # P(T > hi) = 0 <= α
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        above = st.tails(mid)[0] > a
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    _, q_hi = st.tails(hi)
    out = q_hi.copy()
    n = np.rint(hi).astype(np.int64)
    on_atom = (np.abs(hi - n) < 1e-9) & (n >= 0) & (n <= k)
    if np.any(on_atom):
        nn = n[on_atom]
        atom = st.atoms[nn]
        ok = atom > 0
        # α inside the jump of the atom at n: P(T > n) <= α <= P(T >= n); randomise on T = n
        p_gt, q_gt = st.tails(nn.astype(float))
        q_atom = st.atoms[k - nn]          # Q(T = n) = P(T = k − n) (reflection c -> 1 − c)
        frac = np.clip((a[on_atom] - p_gt) / np.where(ok, atom, 1.0), 0.0, 1.0)
        out[on_atom] = np.where(ok, np.minimum(q_gt + frac * q_atom, 1.0), out[on_atom])
    out = np.where(a <= 0.0, 0.0, np.where(a >= 1.0, 1.0, out))
    return out
