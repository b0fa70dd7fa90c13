"""Exact privacy-loss distribution (PLD) of the k-fold Laplace mechanism.

The object studied by Houssiau et al. 2022 (Methods, "Performing the attack", "Theoretical bounds"): an attacker who
knows everyone else's trips subtracts their counts and is left with ``k`` coordinates (the victim's unique trips),
each either ``Lap(0, 1/ε)`` (victim out, ``P``) or ``Lap(1, 1/ε)`` (victim in, ``Q``). This module gives, exactly,

- ``hockey_stick_delta(eps_prime, k, epsilon)``: ``δ(ε') = sup_E P(E) − e^{ε'} Q(E)`` (equal with P and Q swapped,
  the pair is symmetric under ``x → 1 − x``);
- ``epsilon_for_delta(delta, k, epsilon)``: the smallest ``ε' >= 0`` with ``δ(ε') <= delta`` (tight composition);
- ``optimal_accuracy(k, epsilon) = ½ + ½·TV(P^k, Q^k) = ½ + ½·δ(0)``: the success of the best membership test with
  equal priors (Neyman–Pearson / Le Cam).

Method (why it is exact and stable)
-----------------------------------
Per coordinate the privacy loss is ``L(x) = ε(|x−1| − |x|) = ε(1 − 2c)`` with ``c = clip(x, 0, 1)``: atoms at ``±ε``
and a continuous part in between. ``T = Σ c_i`` is therefore a sufficient statistic, ``L = ε(k − 2T)``. Under
``P`` the law of one ``c`` is ``e^{−εc}·μ(dc)`` with ``μ = ½δ₀ + ½δ₁ + (ε/2)·Leb(0, 1)``, and under ``Q`` it is
``e^{−ε(1−c)}·μ(dc)``; hence the law of ``T`` under ``P`` is ``e^{−εt}·μ^{*k}(dt)`` and under ``Q`` it is
``e^{−εk}·e^{εt}·μ^{*k}(dt)``. ``μ^{*k}`` is a sum of atoms at the integers (all coordinates in the atom region)
plus a piecewise polynomial of degree ``k − 1`` with breakpoints at the integers (a binomial mixture of shifted
Irwin–Hall densities, i.e. cardinal B-splines).

Instead of the alternating Irwin–Hall formula (catastrophic cancellation beyond ``k ≈ 20``) we build the P-density
``e^{−εt}·p_m(t − m)`` on each unit interval ``[m, m+1]`` by recursion over the coordinates, holding ``p_m`` in the
Bernstein basis. One step (convolution with the per-coordinate P-law) is

    p'_m = ½ p_m + ½e^{−ε} p_{m−1} + (ε/2)·[∫₀ˢ p_m + e^{−ε}·∫ₛ¹ p_{m−1}] + (ε/2)·α_m,
    α'_n = ½ α_n + ½e^{−ε} α_{n−1}            (atoms, P-masses)

and in the Bernstein basis degree elevation, ``∫₀ˢ`` and ``∫ₛ¹`` are cumulative sums with non-negative weights, so
every operation adds non-negative numbers: no cancellation, relative error ``O(k·u)`` with ``u`` the unit roundoff,
and no overflow (coefficients are P-probability densities). Then

    δ(ε') = Σ_{t < a} (P_T(t) − e^{ε'} Q_T(t)),   a = (k − ε'/ε)/2,

is a sum of non-negative terms: the atoms give ``α_n·(1 − e^{ε' − εk + 2εn})₊`` and each interval gives
``∫ e^{−εs} p_m(s)·(1 − e^{ε' − εk + 2ε(m+s)})₊ ds``, evaluated by Gauss–Legendre quadrature with ``⌈n/2⌉ + 40``
nodes on ``[0, min(1, a − m)]`` (the kink sits at the end of the range); the integrand is a degree-``n`` polynomial
times ``e^{±εs}`` with ``ε <= 10``, for which this many nodes leave a quadrature error far below 1e-14. Measured
against ``dp_accounting`` (tests) and Monte Carlo; the absolute error is ~1e-13 for ``k <= 200``, ``ε <= 10``.

Cost: ``O(K³)`` flops for the whole curve ``k = 0..K`` (K = 70: a few milliseconds).

References
----------
Houssiau, Rocher, de Montjoye (2022), "On the difficulty of achieving differential privacy in practice: user-level
guarantees in aggregate location data", Nature Communications 13:29, Methods.
Meiser & Mohammadi (2018), Sommer et al. (2019): privacy-loss distributions; Koskela et al. (2020) for the
hockey-stick / PLD identities used here.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from odcore.errors import ParameterError, check_positive

__all__ = [
    "LaplaceKFold",
    "composed_epsilon_bounds",
    "composed_epsilon_curve",
    "epsilon_for_delta",
    "hockey_stick_delta",
    "iter_k_fold",
    "optimal_accuracy",
]

#: Range of ε over which the 1e-9 accuracy claim is tested (the method itself works beyond).
EPSILON_MAX_TESTED = 10.0


def _check_epsilon(epsilon) -> float:
    eps = check_positive("epsilon", epsilon)
    if eps > 50:
        raise ParameterError(f"epsilon must be <= 50 for the exact k-fold Laplace PLD, got epsilon={epsilon!r}.")
    return eps


def _check_k_array(k) -> np.ndarray:
    arr = np.asarray(k)
    try:
        f = np.asarray(arr, dtype=float)
    except (TypeError, ValueError):
        raise ParameterError(f"k must be a non-negative integer (number of trips), got k={k!r}.") from None
    if arr.dtype == bool or not np.all(np.isfinite(f)) or np.any(f < 0) or np.any(f != np.round(f)):
        raise ParameterError(f"k must be a non-negative integer (number of trips), got k={k!r}.")
    if f.size and f.max() > 1000:
        # cost is O(k³) (k = 400: ~1 s, k = 1000: ~20 s); beyond, basic/advanced composition bounds apply
        raise ParameterError(f"k must be <= 1000 for the exact k-fold Laplace PLD, got max k={int(f.max())}.")
    return f.astype(np.int64)


# ---------------------------------------------------------------------------------------------------------------
# Bernstein helpers
# ---------------------------------------------------------------------------------------------------------------

@lru_cache(maxsize=256)
def _gauss_legendre(n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Legendre nodes and weights on [0, 1] (cached; read-only arrays).

    Newton's iteration on the Legendre polynomial from the asymptotic guesses ``cos(pi (i + 3/4) / (n + 1/2))``,
    all nodes at once (Press et al., Numerical Recipes, 3rd ed., section 4.6, ``gauleg``): numpy only and a few
    milliseconds, where numpy's ``leggauss`` (an eigenvalue problem) took a third of a command-line call's CPU.
    Agrees with scipy to 1e-14 (tests/odcore/cli/test_cli_startup.py); weights to a relative 1e-11 up to 100 nodes, as
    ``leggauss`` does. Above 100 nodes (``k_max > 120``) scipy's ``roots_legendre``, whose weights stay relatively
    exact near the ends.
    """
    n = int(n_nodes)
    if n > 100:
        from scipy import special

        xs, ws = special.roots_legendre(n)
        xs, ws = 0.5 * (xs + 1.0), 0.5 * ws
        xs.setflags(write=False)
        ws.setflags(write=False)
        return xs, ws
    x = np.cos(np.pi * (np.arange(n) + 0.75) / (n + 0.5))
    for _ in range(100):
        p0, p1 = np.ones(n), x.copy()
        for j in range(2, n + 1):
            p0, p1 = p1, ((2 * j - 1) * x * p1 - (j - 1) * p0) / j
        dp = n * (x * p1 - p0) / (x * x - 1.0)
        step = p1 / dp
        x = x - step
        if float(np.abs(step).max()) < 1e-15:
            break
    p0, p1 = np.ones(n), x.copy()              # the derivative at the converged nodes, for the weights
    for j in range(2, n + 1):
        p0, p1 = p1, ((2 * j - 1) * x * p1 - (j - 1) * p0) / j
    dp = n * (x * p1 - p0) / (x * x - 1.0)
    w = 2.0 / ((1.0 - x * x) * dp * dp)
    x = 0.5 * (x[::-1] + 1.0)
    w = 0.5 * w[::-1]
    x.setflags(write=False)
    w.setflags(write=False)
    return x, w


@lru_cache(maxsize=1024)
def _log_binomials(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(r, log C(n, r))`` for ``r = 0..n`` (cached; read-only; ``math.lgamma``, so no scipy import)."""
    r = np.arange(n + 1, dtype=float)
    lg = np.array([math.lgamma(i + 1.0) for i in range(n + 1)])   # log r! for r = 0..n
    logc = lg[n] - lg - lg[::-1]
    r.setflags(write=False)
    logc.setflags(write=False)
    return r, logc


def _bernstein_matrix(n: int, s: np.ndarray) -> np.ndarray:
    """``B[..., r] = C(n, r) s^r (1 − s)^{n−r}`` for ``s`` strictly inside (0, 1); computed in logs (all > 0)."""
    r, logc = _log_binomials(int(n))
    # endpoints (reached only by rounding) are nudged inside; the change in any value is < 1e-15 relative
    s = np.clip(np.asarray(s, dtype=float), 1e-300, 1.0 - 2.0**-53)[..., None]
    return np.exp(logc + r * np.log(s) + (n - r) * np.log1p(-s))


def _bernstein_eval(coef: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``Σ_r coef[p, r]·B_r^n(s[p, j])`` for rows of Bernstein coefficients of one degree ``n`` (shape ``(P, n+1)``)
    at points ``s`` of shape ``(P, N)`` in [0, 1]: :func:`_bernstein_matrix` times ``coef`` without its ``P·N·(n+1)``
    exponentials (:func:`_horner_bernstein`). Degrees above 500 (binomials near overflow) go through
    :func:`_bernstein_matrix`.
    """
    n = coef.shape[1] - 1
    if n > HORNER_MAX_DEGREE:
        return np.einsum("pnr,pr->pn", _bernstein_matrix(n, s), coef)
    cc = coef * np.exp(_log_binomials(n)[1])
    return _horner_bernstein(cc, cc[:, ::-1], n, s)


HORNER_MAX_DEGREE = 500


def _horner_bernstein(cc: np.ndarray, cc_rev: np.ndarray, n, s: np.ndarray) -> np.ndarray:
    """``Σ_r c_r·B_r^n(s)`` from ``cc[p, r] = c_r·C(n_p, r)`` (zero beyond each row's degree ``n_p``; ``n`` a number
    or one degree per row) and ``cc_rev[p, j] = cc[p, n_p − j]``.

    Horner's rule in ``t = s/(1 − s)`` where ``s <= ½`` (``p = (1 − s)^n·Σ_r c_r C(n, r) t^r``) and in
    ``u = (1 − s)/s`` above (``p = s^n·Σ_j c_{n−j} C(n, j) u^j``): ``t, u <= 1`` and every term is non-negative
    for the non-negative coefficients used here, so the relative error stays ``O(n·u)`` like the sum it replaces;
    the zeros past a row's degree are leading zeros of its polynomial.
    """
    low = s <= 0.5
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        t = np.where(low, s / (1.0 - s), (1.0 - s) / s)
    t = np.nan_to_num(t, nan=0.0, posinf=0.0)   # s = 0 or 1 exactly: only the end coefficient counts
    nn = np.asarray(n)[:, None] if np.ndim(n) else n
    out = np.empty_like(s)
    # each branch on the rows that have a point on its side only (the loss masses' pieces lie on one side: half the
    # work of running both on every point); per point the same operations as both on every point, the same values
    for side, coef in ((low, cc), (~low, cc_rev)):
        rows = side.any(axis=1)
        every = bool(rows.all())
        if not (every or rows.any()):
            continue
        tt = t if every else t[rows]
        coef_t = np.ascontiguousarray((coef if every else coef[rows]).T)     # (degree + 1, rows): a row per step
        acc = np.zeros_like(tt)
        for r in range(coef_t.shape[0] - 1, -1, -1):
            acc *= tt
            acc += coef_t[r][:, None]
        ss = s if every else s[rows]
        nr = nn if np.ndim(nn) == 0 or every else nn[rows]
        val = acc * ((1.0 - ss) ** nr if side is low else ss**nr)
        if every:
            np.copyto(out, val, where=side)
        else:
            out[rows] = np.where(side[rows], val, out[rows])
    return out


@lru_cache(maxsize=512)
def _bernstein_at_nodes(deg: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x, w, B)``: Gauss–Legendre nodes/weights on [0, 1] for degree ``deg`` and ``B = B_r^deg(x)`` (cached)."""
    x, w = _gauss_legendre(_n_nodes(deg))
    b = _bernstein_matrix(deg, x)
    b.setflags(write=False)
    return x, w, b


def _n_nodes(degree: int) -> int:
    # exact for polynomials of degree 2N − 1 >= degree + 70 (room for the e^{±εs} factors); rounded up to a
    # multiple of 8 so that few node sets are computed and cached
    return -(-(degree // 2 + 40) // 8) * 8


@dataclass(frozen=True)
class LaplaceKFold:
    """Exact law of the sufficient statistic ``T = Σ clip(x_i, 0, 1)`` of the k-fold Laplace pair, under ``P``.

    Attributes
    ----------
    k, epsilon:
        Number of coordinates and Laplace parameter (scale 1/ε, sensitivity 1).
    atoms:
        ``atoms[n] = P(T = n)`` (all coordinates in the atom region, ``n`` of them at 1), shape ``(k + 1,)``.
    coef:
        Bernstein coefficients, shape ``(k, k)``: on ``[m, m+1]`` the P-density of ``T`` is
        ``e^{−ε s}·Σ_r coef[m, r]·B_r^{k−1}(s)``, ``s = t − m``. Empty for ``k = 0``.
    """

    k: int
    epsilon: float
    atoms: np.ndarray
    coef: np.ndarray

    # -- hockey stick ------------------------------------------------------------------------------------------
    def delta(self, eps_prime) -> np.ndarray:
        """``δ(ε')`` for an array of ``ε'`` (any real); see the module docstring for the formula."""
        ep = np.atleast_1d(np.asarray(eps_prime, dtype=float))
        k, eps = self.k, self.epsilon
        # atoms: α_n (1 − e^{ε' − εk + 2εn})₊
        n = np.arange(k + 1, dtype=float)
        expo = ep[:, None] - eps * k + 2.0 * eps * n[None, :]
        with np.errstate(over="ignore"):
            out = np.sum(self.atoms[None, :] * np.maximum(-np.expm1(np.minimum(expo, 0.0)), 0.0), axis=1)
        if k == 0:
            return out
        deg = k - 1
        a = (k - ep / eps) / 2.0  # continuous part contributes on t < a
        m = np.arange(k, dtype=float)
        # full intervals [m, m+1] with m + 1 <= a
        rows = int(np.clip(np.floor(a.max()), 0, k))        # only intervals entirely below a are needed
        x, w, _ = _bernstein_at_nodes(deg)                   # (N,), (N,)
        ja_all, jb_all = self._unit_integrals
        ja = np.zeros(k)
        jb = np.zeros(k)
        ja[:rows] = ja_all[:rows]                             # ∫ e^{-εs} p_m
        jb[:rows] = jb_all[:rows]                             # ∫ e^{+εs} p_m
        full = (m[None, :] + 1.0) <= a[:, None]
        expo_m = np.where(full, ep[:, None] - eps * k + 2.0 * eps * m[None, :], -np.inf)
        out = out + np.sum(np.where(full, ja[None, :] - np.exp(expo_m) * jb[None, :], 0.0), axis=1)
        # the interval holding a: ∫_0^τ e^{-εs} p_m(s) (1 − e^{−2ε(τ − s)}) ds
        m0 = np.floor(a)
        part = (m0 >= 0) & (m0 <= k - 1) & (a > m0)
        if np.any(part):
            idx = np.nonzero(part)[0]
            mm = m0[idx].astype(np.int64)
            tau = a[idx] - m0[idx]
            s = tau[:, None] * x[None, :]                     # (P, N)
            bs = _bernstein_matrix(deg, s)                    # (P, N, deg+1)
            ps = np.einsum("pnr,pr->pn", bs, self.coef[mm])
            g = np.exp(-eps * s) * (-np.expm1(-2.0 * eps * (tau[:, None] - s)))
            out[idx] += tau * np.sum(w[None, :] * ps * g, axis=1)
        return np.clip(out, 0.0, 1.0)

    @cached_property
    def _unit_integrals(self) -> tuple[np.ndarray, np.ndarray]:
        """``(∫₀¹ e^{−εs} p_m(s) ds, ∫₀¹ e^{+εs} p_m(s) ds)`` for every unit interval ``m`` (made once per law: every
        δ(ε') reads them)."""
        x, w, bx = _bernstein_at_nodes(self.k - 1)
        px = self.coef @ bx.T                                 # (k, N): p_m at the nodes
        return px @ (w * np.exp(-self.epsilon * x)), px @ (w * np.exp(self.epsilon * x))

    def tails(self, t) -> tuple[np.ndarray, np.ndarray]:
        """``(P(T > t), Q(T > t))`` for an array of thresholds ``t`` (atoms at ``t`` excluded).

        Used for ROC curves: the test "declare in when T > t" has FPR ``P(T > t)`` and TPR ``Q(T > t)``.
        ``Q(T > t) = P(T < k − t)`` by the reflection ``c → 1 − c`` that maps Q to P, so both are sums of
        non-negative P-masses (no cancellation, no overflow for large kε).
        """
        tt = np.atleast_1d(np.asarray(t, dtype=float))
        return self._p_mass(tt, upper=True), self._p_mass(self.k - tt, upper=False)

    def _p_mass(self, u: np.ndarray, *, upper: bool) -> np.ndarray:
        """``P(T > u)`` if ``upper`` else ``P(T < u)``, as sums of non-negative terms."""
        k, eps = self.k, self.epsilon
        n = np.arange(k + 1, dtype=float)
        sel = (n[None, :] > u[:, None]) if upper else (n[None, :] < u[:, None])
        out = np.sum(np.where(sel, self.atoms[None, :], 0.0), axis=1)
        if k == 0:
            return np.clip(out, 0.0, 1.0)
        deg = k - 1
        m = np.arange(k, dtype=float)
        x, w, _ = _bernstein_at_nodes(deg)
        ja = self._unit_integrals[0]                          # ∫₀¹ e^{−εs} p_m(s) ds, made once per law
        full = (m[None, :] >= u[:, None]) if upper else ((m[None, :] + 1.0) <= u[:, None])
        out += np.sum(np.where(full, ja[None, :], 0.0), axis=1)
        m0 = np.floor(u)
        part = (m0 >= 0) & (m0 <= k - 1) & (u > m0)
        if np.any(part):
            idx = np.nonzero(part)[0]
            mm = m0[idx].astype(np.int64)
            frac = u[idx] - m0[idx]
            lo = frac if upper else np.zeros_like(frac)
            width = (1.0 - frac) if upper else frac
            s = lo[:, None] + width[:, None] * x[None, :]
            ps = np.einsum("pnr,pr->pn", _bernstein_matrix(deg, s), self.coef[mm])
            out[idx] += width * np.sum(w * ps * np.exp(-eps * s), axis=1)
        return np.clip(out, 0.0, 1.0)


def iter_k_fold(k_max: int, epsilon: float) -> Iterator[LaplaceKFold]:
    """Yield the exact :class:`LaplaceKFold` for ``k = 0, 1, ..., k_max`` (one recursion step each).

    The recursion is the convolution with one coordinate's law, in the Bernstein basis (module docstring).
    """
    eps = _check_epsilon(epsilon)
    e = math.exp(-eps)
    atoms = np.ones(1)
    coef = np.zeros((0, 0))
    yield LaplaceKFold(0, eps, atoms, coef)
    for k in range(1, int(k_max) + 1):
        n_old = k - 2  # old degree (coef has n_old + 1 columns); k = 1: no continuous part yet
        new = np.zeros((k, k))
        if k >= 2:
            c = coef
            cols = n_old + 1
            r = np.arange(cols + 1, dtype=float)
            # degree elevation n_old -> n_old + 1: E_r = r/(n+1)·b_{r-1} + (1 − r/(n+1))·b_r
            elev = np.zeros((k - 1, cols + 1))
            elev[:, 1:] += (r[1:] / cols) * c
            elev[:, :-1] += (1.0 - r[:-1] / cols) * c
            # ∫_0^s p (forward) and ∫_s^1 p (reverse) as degree n_old + 1 Bernstein polynomials
            fwd = np.zeros((k - 1, cols + 1))
            fwd[:, 1:] = np.cumsum(c, axis=1) / cols
            rev = np.zeros((k - 1, cols + 1))
            rev[:, :-1] = np.cumsum(c[:, ::-1], axis=1)[:, ::-1] / cols
            new[:-1] += 0.5 * elev + 0.5 * eps * fwd
            new[1:] += 0.5 * e * elev + 0.5 * eps * e * rev
        # atoms convolved with the continuous part of the new coordinate: constant (ε/2)·α_m on [m, m+1]
        new += (0.5 * eps * atoms[:k])[:, None]
        new_atoms = np.zeros(k + 1)
        new_atoms[:-1] += 0.5 * atoms
        new_atoms[1:] += 0.5 * e * atoms
        atoms, coef = new_atoms, new
        yield LaplaceKFold(k, eps, atoms, coef)


#: Largest k whose laws k = 0..K are kept for reuse (:func:`_laws`; K = 128 holds ~6 MB).
LAWS_CACHED_K = 128


@lru_cache(maxsize=8)
def _laws(k_max: int, epsilon: float) -> tuple[LaplaceKFold, ...]:
    """The laws k = 0..k_max (cached: one page asks for the same ε's laws for its card, its curves and its loss
    masses)."""
    laws = tuple(iter_k_fold(k_max, epsilon))
    for st in laws:   # shared: read-only
        st.atoms.setflags(write=False)
        st.coef.setflags(write=False)
    return laws


def _by_k(k_arr: np.ndarray, epsilon: float) -> dict[int, LaplaceKFold]:
    wanted = set(np.asarray(k_arr).ravel().tolist())   # np.unique would import numpy.ma (15 ms)
    out: dict[int, LaplaceKFold] = {}
    if not wanted:
        return out
    k_max = max(wanted)
    laws = _laws(k_max, float(epsilon)) if k_max <= LAWS_CACHED_K else iter_k_fold(k_max, epsilon)
    for st in laws:
        if st.k in wanted:
            out[st.k] = st
    return out


# ---------------------------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------------------------

def hockey_stick_delta(eps_prime, k, epsilon: float):
    """Exact hockey-stick divergence ``δ(ε') = sup_E P^k(E) − e^{ε'}·Q^k(E)`` of the k-fold Laplace mechanism.

    ``P = Lap(0, 1/ε)``, ``Q = Lap(1, 1/ε)`` per coordinate (sensitivity 1); the value is the same with P and Q
    swapped. The mechanism is (ε', δ(ε'))-DP and no smaller δ holds.

    Parameters
    ----------
    eps_prime:
        Real or array (negative values allowed: δ(ε') for ε' < 0 is the trade-off-curve dual used for ROC).
    k:
        Non-negative integer or integer array (number of unique trips of the victim).
    epsilon:
        Laplace parameter ε > 0 (scale 1/ε).

    Returns
    -------
    float or numpy.ndarray
        Broadcast shape of ``eps_prime`` and ``k``.

    Raises
    ------
    ParameterError
        ε not > 0, k not a non-negative integer, ε' not finite.

    Examples
    --------
    >>> round(float(hockey_stick_delta(0.0, 1, 0.66)), 6)  # TV of one coordinate = 1 − e^{−ε/2}
    0.281076
    """
    eps = _check_epsilon(epsilon)
    kk = _check_k_array(k)
    ep = np.asarray(eps_prime, dtype=float)
    if not np.all(np.isfinite(ep)):
        raise ParameterError(f"eps_prime must be finite, got eps_prime={eps_prime!r}.")
    ep_b, k_b = np.broadcast_arrays(ep, kk)
    out = np.empty(ep_b.shape, dtype=float)
    states = _by_k(k_b.ravel(), eps)
    flat_ep, flat_k, flat_out = ep_b.ravel(), k_b.ravel(), out.reshape(-1)
    for kv, st in states.items():
        sel = flat_k == kv
        flat_out[sel] = st.delta(flat_ep[sel])
    return float(out) if out.ndim == 0 else out


def optimal_accuracy(k, epsilon: float):
    """Success of the optimal membership test with equal priors: ``½ + ½·TV(P^k, Q^k) = ½ + ½·δ(0)``.

    Houssiau et al. 2022, Fig. 1 (their Monte Carlo p_k; e.g. p_3 = 70.5 %, p_32 = 95.4 % at ε = 0.66).

    Examples
    --------
    >>> round(float(optimal_accuracy(2, 0.66)), 4)  # Houssiau et al.'s p_2
    0.6563
    """
    return 0.5 + 0.5 * hockey_stick_delta(0.0, k, epsilon)


def epsilon_for_delta(delta, k, epsilon: float):
    """Smallest ``ε' >= 0`` such that the k-fold Laplace mechanism is ``(ε', delta)``-DP (tight composition).

    Solves ``δ(ε') = delta`` (δ is continuous and strictly decreasing where positive) on ``[0, kε]`` by a
    safeguarded Newton iteration with the exact slope, every (k, δ) at once (:func:`_solve_newton`; matched
    against Brent's method on :func:`hockey_stick_delta` in the tests); 0 when ``δ(0) <= delta``; never above
    basic composition ``kε``.

    Parameters
    ----------
    delta:
        Target δ in [0, 1], scalar or array (broadcast with ``k``; the k-fold law is built once for all δ).
    k:
        Non-negative integer or integer array.
    epsilon:
        Laplace parameter ε > 0.

    Returns
    -------
    float or numpy.ndarray (broadcast shape of ``delta`` and ``k``)

    Examples
    --------
    >>> round(float(epsilon_for_delta(0.0, 3, 0.66)), 6)  # δ = 0: basic composition 3ε is tight
    1.98
    """
    eps = _check_epsilon(epsilon)
    try:
        d = np.asarray(delta, dtype=float)
    except (TypeError, ValueError):
        raise ParameterError(f"delta must be a number in [0, 1], got delta={delta!r}.") from None
    if not np.all((d >= 0.0) & (d <= 1.0)):
        raise ParameterError(f"delta must be in [0, 1], got delta={delta!r}.")
    kk = _check_k_array(k)
    d_b, k_b = np.broadcast_arrays(d, kk)
    out = np.zeros(k_b.shape, dtype=float)
    flat_d, flat_k, flat_out = d_b.ravel(), k_b.ravel(), out.reshape(-1)
    flat_out[:] = np.where(flat_d <= 0.0, flat_k * eps, 0.0)      # δ = 0: basic composition kε is tight
    solve = np.nonzero((flat_k > 0) & (flat_d > 0.0))[0]
    if solve.size:
        states = _by_k(flat_k[solve], eps)  # one recursion up to max k, shared by every delta
        flat_out[solve] = _solve_newton([states[int(kv)] for kv in flat_k[solve]], flat_d[solve])
    return float(out) if out.ndim == 0 else out


def _solve_newton(states: list[LaplaceKFold], targets: np.ndarray) -> np.ndarray:
    """Smallest ``ε' >= 0`` with ``δ(ε') <= targets[p]`` for the law ``states[p]``, all problems solved together.

    Every problem has ``k >= 1`` and ``target > 0``; the answer is 0 where ``δ(0) <= target``. The unknown is ``a = (k − ε'/ε)/2`` (the statistic
    ``T`` below which the continuous part counts, module docstring); ``δ`` is increasing in ``a`` with slope

        dδ/da = 2ε·[Σ_{n<a} α_n e^{−2ε(a−n)} + Σ_{m+1<=a} e^{−2ε(a−m)}·∫₀¹ e^{εs}p_m + ∫₀^τ p_{m₀}(s) e^{εs−2ετ} ds],

    every term non-negative and evaluated with the same nodes as ``δ`` itself (:meth:`LaplaceKFold.delta`: same
    formula, same Gauss–Legendre nodes per k). Newton's method on ``log δ(a) − log target`` inside a bracket that
    shrinks at every step (a step leaving it is replaced by bisection), run on every problem at once: one
    vectorised evaluation per iteration instead of one Brent solve per k. It stops when the last step moved
    ``ε'`` by at most 1e-12 (Newton converges quadratically: the error is then far below that).
    """
    n_p = len(states)
    eps = states[0].epsilon
    ks = np.array([st.k for st in states], dtype=np.int64)
    kmax = int(ks.max())
    # padded per-problem tables: atoms, unit integrals, Gauss–Legendre nodes of each problem's degree
    atoms = np.zeros((n_p, kmax + 1))
    ja = np.zeros((n_p, kmax))
    jb = np.zeros((n_p, kmax))
    n_nodes = np.array([_n_nodes(int(k) - 1) for k in ks])
    nmax = int(n_nodes.max())
    xs = np.full((n_p, nmax), 0.5)
    ws = np.zeros((n_p, nmax))
    logc = np.full((n_p, kmax), -np.inf)
    for p, st in enumerate(states):
        k = st.k
        atoms[p, :k + 1] = st.atoms
        ja[p, :k], jb[p, :k] = st._unit_integrals
        x, w = _gauss_legendre(int(n_nodes[p]))
        xs[p, :x.size], ws[p, :w.size] = x, w
        logc[p, :k] = _log_binomials(k - 1)[1]
    deg = (ks - 1).astype(float)
    binom = np.exp(logc)                                  # C(k − 1, r), 0 past the degree
    r = np.arange(kmax, dtype=float)
    n_at = np.arange(kmax + 1, dtype=float)
    m_all = np.arange(kmax, dtype=float)
    log_t = np.log(targets)

    def delta_slope(idx: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k = ks[idx].astype(float)
        below = n_at[None, :] < a[:, None]                                     # atoms with n < a
        dist = np.where(below, a[:, None] - n_at[None, :], 0.0)
        ex = np.exp(-2.0 * eps * dist)
        d = np.sum(np.where(below, atoms[idx] * -np.expm1(-2.0 * eps * dist), 0.0), axis=1)
        s1 = np.sum(np.where(below, atoms[idx] * ex, 0.0), axis=1)
        full = (m_all[None, :] + 1.0) <= a[:, None]
        exf = np.exp(-2.0 * eps * np.where(full, a[:, None] - m_all[None, :], 0.0))
        d += np.sum(np.where(full, ja[idx] - exf * jb[idx], 0.0), axis=1)
        s1 += np.sum(np.where(full, exf * jb[idx], 0.0), axis=1)
        m0 = np.floor(a)
        part = (m0 >= 0) & (m0 <= k - 1) & (a > m0)
        if np.any(part):
            q = idx[part]
            mm = m0[part].astype(np.int64)
            tau = a[part] - m0[part]
            coef = np.zeros((q.size, kmax))
            for j, (pp, mj) in enumerate(zip(q, mm, strict=True)):
                coef[j, :ks[pp]] = states[pp].coef[mj]
            s = tau[:, None] * xs[q]                                                   # (Q, N)
            ps = np.zeros_like(s)
            # p_m at the nodes, in groups of similar k (each padded to its own largest k and node count only)
            order = np.argsort(ks[q], kind="stable")
            chunk = int(np.clip(2_000_000 // (nmax * kmax), 1, 128))
            for c0 in range(0, q.size, chunk):
                c = order[c0:c0 + chunk]
                qc = q[c]
                kc, nc = int(ks[qc].max()), int(n_nodes[qc].max())
                if kc - 1 <= HORNER_MAX_DEGREE:   # Horner's rule, each row of its own degree (zeros beyond)
                    cc = coef[c, :kc] * binom[qc, :kc]
                    idx = (ks[qc, None] - 1) - np.arange(kc)
                    cc_rev = np.where(idx >= 0, np.take_along_axis(cc, np.maximum(idx, 0), axis=1), 0.0)
                    ps[c, :nc] = _horner_bernstein(cc, cc_rev, ks[qc] - 1, s[c, :nc])
                    continue
                # the Bernstein basis of each problem's own degree, zero beyond it (logc = −inf)
                sc = np.clip(s[c, :nc], 1e-300, 1.0 - 2.0**-53)[..., None]
                rc = r[:kc]
                bern = np.exp(logc[qc, None, :kc] + rc * np.log(sc) + (deg[qc, None, None] - rc) * np.log1p(-sc))
                ps[c, :nc] = np.einsum("qnr,qr->qn", bern, coef[c, :kc])
            wp = ws[q] * ps
            d[part] += tau * np.sum(wp * np.exp(-eps * s) * -np.expm1(-2.0 * eps * (tau[:, None] - s)), axis=1)
            s1[part] += tau * np.sum(wp * np.exp(eps * s - 2.0 * eps * tau[:, None]), axis=1)
        return np.clip(d, 0.0, 1.0), 2.0 * eps * s1

    lo = np.zeros(n_p)
    hi = ks / 2.0
    out = np.full(n_p, np.nan)
    d, _ = delta_slope(np.arange(n_p), hi)            # ε' = 0
    zero = d <= targets                                # δ(0) <= target: ε' = 0
    out[zero] = 0.0
    active = np.nonzero(~zero)[0]
    # log δ − log target at the bracket's ends (δ = 0 at a = 0)
    g_lo = np.full(n_p, -np.inf)
    g_hi = np.log(np.maximum(d, 1e-300)) - log_t
    # start at the Rényi-DP bound, an upper bound on ε' (so a start left of the root, where the Newton steps of the
    # concave log δ(a) approach it from below)
    from odcore.privacy.rdp import rdp_epsilon

    start = np.empty(n_p)
    for t in np.unique(targets[active]):
        sel = active[targets[active] == t]
        start[sel] = rdp_epsilon(float(t), ks[sel], eps)
    a = np.clip((ks - start / eps) / 2.0, 0.0, hi)
    a = np.where((a > 0) & (a < hi), a, hi / 2.0)
    for _ in range(100):
        aa = a[active]
        d, sl = delta_slope(active, aa)
        g = np.where(d > 0, np.log(np.maximum(d, 1e-300)) - log_t[active], -np.inf)
        # shrink the bracket: δ(a) > target -> the root is left of a
        right = g > 0
        hi[active], g_hi[active] = np.where(right, aa, hi[active]), np.where(right, g, g_hi[active])
        lo[active], g_lo[active] = np.where(right, lo[active], aa), np.where(right, g_lo[active], g)
        lo_a, hi_a = lo[active], hi[active]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            ratio = np.where((d > 0) & (sl > 0), g * d / sl, np.nan)     # log δ / (d log δ / da)
            new = aa - ratio                                              # Newton on log δ(a)
            # Newton on log δ(log a): exact in one step where δ ∝ a^p (small a)
            alt = aa * np.exp(-ratio / aa)
            # else the secant through the bracket's ends (kept 1 % inside it), or its midpoint
            sec = lo_a - g_lo[active] * (hi_a - lo_a) / (g_hi[active] - g_lo[active])
        inside = np.isfinite(new) & (new > lo_a) & (new < hi_a)
        alt_in = np.isfinite(alt) & (alt > lo_a) & (alt < hi_a)
        # left of the root (g < 0) the plain step falls short where δ ∝ a^p: take the longer one of the two
        use_alt = alt_in & (~inside | ((g < 0) & (alt > new)))
        width = hi_a - lo_a
        sec = np.where(np.isfinite(sec), np.clip(sec, lo_a + 0.01 * width, hi_a - 0.01 * width), lo_a + 0.5 * width)
        new = np.where(use_alt, alt, np.where(inside, new, sec))
        moved = np.abs(new - aa) * 2.0 * eps
        a[active] = new
        # converged: a step of at most 1e-11 in ε' near the root (after a Newton step the error left is of the order
        # of its square; δ itself is computed to ~1e-9 relative, which moves the root by less), or a bracket
        # narrower than 1e-10
        done = ((moved <= 1e-11) & (np.abs(g) <= 1e-6)) | (width * 2.0 * eps <= 1e-10)
        out[active[done]] = eps * (ks[active[done]] - 2.0 * a[active[done]])
        active = active[~done]
        if active.size == 0:
            break
    if active.size:   # not reached in the tests; the bracket's midpoint is within its width of the root
        out[active] = eps * (ks[active] - (lo[active] + hi[active]))
    return out


# ---------------------------------------------------------------------------------------------------------------
# Many weekly releases: the exact weekly law, discretised with guaranteed rounding, composed by FFT
# ---------------------------------------------------------------------------------------------------------------

def _loss_bin_masses(st: LaplaceKFold, h: float) -> np.ndarray:
    """P-masses of the privacy loss ``L = ε(k − 2T)`` in the bins ``(L_{j−1}, L_j]``, ``L_j = −kε + j·h``.

    ``out[0]`` is the mass at ``L_0 = −kε`` (the atom ``T = k``); ``out[j]`` (``j >= 1``) the mass in
    ``(L_{j−1}, L_j]``, i.e. ``u_j <= T < u_{j−1}`` with ``u_j = k − j·h/(2ε)``. Continuous parts are integrated per
    sub-interval with 8-point Gauss–Legendre (sub-intervals are ~h/(2ε) wide, so the degree-(k−1) polynomial times
    ``e^{−εt}`` is resolved to roundoff); atoms go to the bin that holds them. All terms are non-negative.
    """
    k, eps = st.k, st.epsilon
    n_bins = math.ceil(2.0 * k * eps / h - 1e-9)
    out = np.zeros(n_bins + 1)
    # atoms at T = n: L = ε(k − 2n) lies in bin ceil((L − L_0)/h)
    n = np.arange(k + 1)
    j_atom = np.clip(np.ceil((2.0 * eps * (k - n)) / h - 1e-9).astype(np.int64), 0, n_bins)
    np.add.at(out, j_atom, st.atoms)
    if k == 0:
        return out
    tau = h / (2.0 * eps)
    # T-edges u_j (descending) merged with the integer breakpoints, so each piece lies in one unit interval
    u = np.clip(k - tau * np.arange(n_bins + 1), 0.0, float(k))
    edges = np.unique(np.concatenate([u, np.arange(k + 1, dtype=float)]))       # ascending
    a, b = edges[:-1], edges[1:]
    m = np.minimum(np.floor(a).astype(np.int64), k - 1)
    # bin of each piece: L in (L_{j−1}, L_j]  <=>  T in [u_j, u_{j−1}); piece [a, b) has T-midpoint c
    c = 0.5 * (a + b)
    j_piece = np.clip(np.ceil((k - c) / tau).astype(np.int64), 1, n_bins)
    x, w = _gauss_legendre(8)
    deg = k - 1
    chunk = max(1, 4_000_000 // (8 * (deg + 1)))
    for lo in range(0, a.size, chunk):
        sl = slice(lo, lo + chunk)
        width = b[sl] - a[sl]
        s_loc = (a[sl] - m[sl])[:, None] + width[:, None] * x[None, :]               # (P, 8) in [0, 1]
        pm = _bernstein_eval(st.coef[m[sl]], s_loc)                                   # (P, 8)
        mass = width * np.sum(w * pm * np.exp(-eps * s_loc), axis=1)
        np.add.at(out, j_piece[sl], np.maximum(mass, 0.0))
    return out


def _epsilon_from_pmf(p: np.ndarray, l0: float, h: float, delta: float) -> float:
    """Smallest ``ε' >= 0`` with ``Σ_j p_j (1 − e^{ε' − L_j})₊ <= delta`` on the grid ``L_j = l0 + j·h``.

    ``δ(L_j) = A_{j+1} − R_j`` with ``A_j = Σ_{i >= j} p_i`` and ``R_j = Σ_{i > j} p_i e^{−(i − j)h} <= e^{−h}·A_{j+1}``,
    so ``(1 − e^{−h})·A_{j+1} <= δ(L_j) <= A_{j+1}``: the crossing lies where ``A_{j+1}`` is between ``delta`` and
    ``delta/(1 − e^{−h})``, and ``R`` (a backward recursion) is run from the top of the grid down to there only (the
    same arithmetic as over the whole grid, so the same values).
    """
    from scipy.signal import lfilter

    n = p.size
    grid = l0 + h * np.arange(n)
    tail = np.cumsum(p[::-1])[::-1]                          # A_j = Σ_{i >= j} p_i
    q = np.exp(-h)
    start = int(np.searchsorted(grid, 0.0, side="left"))
    if start >= n:
        return 0.0
    a_next = np.append(tail[1:], 0.0)
    # below j0 every δ(L_j) >= (1 − q)·A_{j+1} > delta (with a factor 2 to spare for rounding)
    j0 = max(start, int(np.searchsorted(-a_next, -2.0 * delta / -math.expm1(-h), side="left")) - 1)
    while True:
        # R_j = Σ_{i > j} p_i e^{−(i − j)h}, j >= j0 (a stable backward recursion: an IIR filter on the reversed pmf)
        r = lfilter([0.0, q], [1.0, -q], p[:j0 - 1:-1] if j0 > 0 else p[::-1])[::-1]
        delta_at = np.maximum(a_next[j0:] - r, 0.0)           # δ(L_j) = Σ_{i > j} p_i (1 − e^{L_j − L_i})
        hit = np.nonzero(delta_at <= delta)[0]
        if j0 == start or (hit.size and hit[0] > 0):
            break
        j0 = start                                            # not bracketed after all: the whole range
    if hit.size == 0:
        return float(grid[-1])
    if hit[0] == 0 and j0 == start:
        # δ(0) with the bins of L > 0 (L = 0 contributes nothing)
        pos = grid > 0.0
        d0 = float(np.sum(p[pos] * -np.expm1(-grid[pos])))
        if d0 <= delta:
            return 0.0
    j = j0 + int(hit[0])
    # on [L_{j−1}, L_j): δ(ε') = A_j − e^{ε' − L_j}·(p_j + R_j)
    lo = max(float(grid[j - 1]) if j > 0 else 0.0, 0.0)
    denom = p[j] + r[j - j0]
    if not denom > 0.0 or tail[j] <= delta:
        return float(max(grid[j], 0.0)) if tail[j] > delta else lo
    return float(np.clip(grid[j] + math.log((tail[j] - delta) / denom), lo, grid[j]))


def composed_epsilon_bounds(delta: float, k: int, epsilon: float, weeks: int, *,
                            interval: float = 1e-3) -> tuple[float, float]:
    """Bracket on the tight ``ε(δ)`` of ``weeks`` releases of the k-fold Laplace mechanism (``weeks·k`` coordinates).

    The exact weekly privacy-loss law (this module) is put on a grid of step ``interval`` twice: every bin's mass
    moved to its upper loss edge (a pessimistic PLD: its δ(ε') is >= the true one, so the ε' it gives is an upper
    bound) and to its lower edge (optimistic: a lower bound). Each is composed ``weeks`` times by FFT and solved for
    ``delta``. The true tight value lies in the returned ``(lower, upper)``; the gap is at most about
    ``2·weeks·interval`` (Meiser & Mohammadi 2018; Koskela et al. 2020 for the rounding argument).

    Use it for budgets over many weeks (e.g. 52 weeks × 70 trips = 3640 coordinates), beyond the reach of the exact
    O(k³) recursion; for ``weeks·k <= 1000`` :func:`epsilon_for_delta` is exact.

    Parameters
    ----------
    delta:
        Target δ in (0, 1).
    k:
        Unique trips per week (coordinates per weekly release), 0 <= k <= 1000.
    epsilon:
        Laplace parameter ε > 0 of one count.
    weeks:
        Number of weekly releases composed, >= 1.
    interval:
        Grid step of the privacy loss (smaller: tighter bracket, more memory; the composed grid has about
        ``2·weeks·k·ε/interval`` points).

    Examples
    --------
    >>> lo, hi = composed_epsilon_bounds(1e-6, 5, 0.66, 4)
    >>> exact = epsilon_for_delta(1e-6, 20, 0.66)
    >>> bool(lo <= exact <= hi) and hi - lo < 0.01
    True
    """
    lo, hi = composed_epsilon_curve(delta, k, epsilon, [weeks], interval=interval)
    return float(lo[0]), float(hi[0])


def composed_epsilon_curve(delta: float, k: int, epsilon: float, weeks, *,
                           interval: float = 1e-3, lower: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """:func:`composed_epsilon_bounds` for several numbers of weeks at once (one weekly law, one FFT).

    Returns ``(lower, upper)`` arrays, one entry per value of ``weeks`` (integers >= 1); with ``lower=False`` only
    the upper end is computed (half the work) and ``lower`` is NaN.

    Examples
    --------
    >>> lo, hi = composed_epsilon_curve(1e-6, 5, 0.66, [1, 2, 4])
    >>> bool(np.all(lo <= hi)) and bool(np.all(np.diff(hi) > 0))
    True
    """

    eps = _check_epsilon(epsilon)
    try:
        d = float(delta)
    except (TypeError, ValueError):
        raise ParameterError(f"delta must be in (0, 1), got delta={delta!r}.") from None
    if not 0.0 < d < 1.0:
        raise ParameterError(f"delta must be in (0, 1), got delta={delta!r}.")
    kk = int(_check_k_array(k))
    ws = np.atleast_1d(np.asarray(weeks))
    if ws.size == 0 or not np.all(np.isfinite(ws.astype(float))) or np.any(ws != np.round(ws)) or np.any(ws < 1):
        raise ParameterError(f"weeks must be integers >= 1, got weeks={weeks!r}.")
    ws = ws.astype(np.int64)
    h = check_positive("interval", interval)
    lower_out, upper = np.zeros(ws.shape), np.zeros(ws.shape)
    if kk == 0:
        return lower_out, upper
    w_max = int(ws.max())
    if 2.0 * w_max * kk * eps / h > 5e7:
        raise ParameterError(f"interval={interval} makes a grid of {2 * w_max * kk * eps / h:,.0f} points for "
                             f"weeks={w_max}, k={kk}, epsilon={eps}; use a larger interval (<= 5e7 points).")
    # Mass farther out than TAIL_MASS·δ on either side is left out of the composed grid (a window around the bulk
    # of the w-week law, found by a Chernoff bound); the ε it gives accounts for it (see _windowed_epsilons).
    tau = TAIL_MASS * d
    (lower_pmf, lower_mgf), (upper_pmf, upper_mgf) = _weekly_pmfs(kk, eps, h)
    ends = ((lower_pmf, lower_mgf, lower_out, +1.0), (upper_pmf, upper_mgf, upper, -1.0))
    for pmf, mgf, out, sign in ends if lower else ends[1:]:
        out[:] = _windowed_epsilons(pmf, -kk * eps, h, ws, d + sign * 2.0 * tau, tau, mgf)
    if not lower:
        lower_out[:] = np.nan
    return lower_out, upper


@lru_cache(maxsize=32)
def _weekly_masses(k: int, epsilon: float, h: float) -> np.ndarray:
    """:func:`_loss_bin_masses` of the exact k-fold law (cached: a page asks for the same weekly law for its
    many-week curve and for its budget card; read-only)."""
    out = _loss_bin_masses(_by_k(np.array([k]), epsilon)[k], h)
    out.setflags(write=False)
    return out


@lru_cache(maxsize=32)
def _weekly_pmfs(k: int, epsilon: float, h: float) -> tuple[tuple[np.ndarray, tuple], tuple[np.ndarray, tuple]]:
    """The weekly law rounded down and up on the loss grid, each with its :func:`_log_mgf_table` (cached with the
    masses: the budget card and the many-week curve compose the same law)."""
    masses = _weekly_masses(k, epsilon, h)
    upper_pmf = masses                                   # mass of (L_{j−1}, L_j] at L_j
    lower_pmf = np.append(masses[1:], 0.0)               # ... at L_{j−1}
    lower_pmf[0] += masses[0]                            # the atom at L_0 stays at L_0
    lower_pmf.setflags(write=False)
    l0 = -k * epsilon
    return (lower_pmf, _log_mgf_table(lower_pmf, l0, h)), (upper_pmf, _log_mgf_table(upper_pmf, l0, h))


TAIL_MASS = 1e-9   # per side, relative to δ: what the composed window may leave out (moves δ by 2e-9·δ)


def _log_mgf_table(pmf: np.ndarray, l0: float, h: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(λ, log M(λ), log M(−λ))`` of the law ``pmf`` on the grid ``l0 + j·h``, ``M(t) = E e^{tL}``, on the
    log-spaced grid of λ that :func:`_chernoff_window` minimises over."""
    grid = l0 + h * np.arange(pmf.size)
    nz = pmf > 0
    lp, g = np.log(pmf[nz]), grid[nz]
    mu = float(np.sum(pmf[nz] * g) / np.sum(pmf[nz]))
    sd = float(np.sqrt(np.sum(pmf[nz] * (g - mu) ** 2) / np.sum(pmf[nz]))) or h
    lam = np.geomspace(1e-3, 30.0, 48) / sd                                      # (Λ,)

    def log_mgf(t: np.ndarray) -> np.ndarray:                                   # log E e^{tL}, stable
        x = np.multiply.outer(t, g)                                             # (Λ, n), worked on in place
        x += lp
        top = x.max(axis=1)
        x -= top[:, None]
        np.exp(x, out=x)
        return top + np.log(x.sum(axis=1))

    return lam, log_mgf(lam), log_mgf(-lam)


def _chernoff_window(pmf: np.ndarray, l0: float, h: float, ws: np.ndarray, tau: float,
                     mgf: tuple | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Loss bounds ``(lo_w, hi_w)`` with ``P(S_w < lo_w) <= tau`` and ``P(S_w > hi_w) <= tau`` for the sum ``S_w``
    of ``w`` independent losses of law ``pmf`` (grid ``l0 + j·h``): Chernoff, ``P(S >= t) <= M(λ)^w e^{−λt}``,
    at the best λ of a log-spaced grid (any λ > 0 gives a valid bound), likewise for the lower tail. ``mgf``:
    the law's :func:`_log_mgf_table` if already made."""
    lam, log_m_up, log_m_lo = _log_mgf_table(pmf, l0, h) if mgf is None else mgf
    w = ws.astype(float)[:, None]
    hi = np.min((w * log_m_up[None, :] - math.log(tau)) / lam[None, :], axis=1)
    lo = np.max((math.log(tau) - w * log_m_lo[None, :]) / lam[None, :], axis=1)
    full_lo, full_hi = ws * l0, ws * (l0 + h * (pmf.size - 1))
    return np.maximum(lo, full_lo), np.minimum(hi, full_hi)


def _windowed_epsilons(pmf: np.ndarray, l0: float, h: float, ws: np.ndarray, target: float,
                       tau: float, mgf: tuple | None = None) -> np.ndarray:
    """``_epsilon_from_pmf`` of the ``w``-fold composition of ``pmf`` at δ = ``target``, for each ``w`` of ``ws``.

    The w-fold law is the FFT power of the one-week law on a circular grid of ``S`` points that holds the window
    ``[lo_w, hi_w]`` of :func:`_chernoff_window` (mass outside it: at most ``tau`` per side). Folding modulo ``S``
    moves that mass into the window, so every δ(ε') read from the window is within ``2·tau`` of the true one; the
    caller asks for ``δ ∓ 2·tau`` so that the upper (lower) end of the bracket stays an upper (lower) bound. ``S``
    is the widest window instead of the whole support ``w_max·(size − 1) + 1`` (5–12× fewer points at 52 weeks).
    """
    from scipy import fft

    n1 = pmf.size - 1
    lo, hi = _chernoff_window(pmf, l0, h, ws, tau, mgf)
    a = np.clip(np.floor((lo - ws * l0) / h).astype(np.int64) - 1, 0, ws * n1)   # first index kept, per w
    b = np.clip(np.ceil((hi - ws * l0) / h).astype(np.int64) + 1, 0, ws * n1)    # last index kept
    size = fft.next_fast_len(int(max(np.max(b - a + 1), pmf.size)), real=True)
    spec = fft.rfft(pmf, size)            # pmf.size <= size: no folding of the one-week law itself
    out = np.zeros(ws.shape)
    order = np.argsort(ws, kind="stable")
    # the spectra of the w-fold laws in turn, transformed back a batch at a time (one call for many weeks, on every
    # core: the same values as one call per week); a batch holds at most IFFT_BATCH_BYTES of spectra
    batch = max(1, IFFT_BATCH_BYTES // (16 * spec.size))
    cur, cur_w = np.ones_like(spec), 0
    for b0 in range(0, order.size, batch):
        part = order[b0:b0 + batch]
        specs = np.empty((part.size, spec.size), dtype=spec.dtype)
        for j, i in enumerate(part):
            w = int(ws[i])
            if w > cur_w:
                cur = cur * (spec if w - cur_w == 1 else spec ** (w - cur_w))
                cur_w = w
            specs[j] = cur
        circs = fft.irfft(specs, size, axis=1, workers=BATCH_WORKERS)
        for j, i in enumerate(part):
            out[i] = _window_epsilon(circs[j], int(a[i]), int(b[i]), size, w_l0=int(ws[i]) * l0, h=h, target=target)
    return out


IFFT_BATCH_BYTES = 16 << 20
"""Spectra transformed back in one call by :func:`_windowed_epsilons` (bytes; 16 MiB)."""
BATCH_WORKERS = max(1, min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1))
"""Threads of the batched inverse FFTs in :func:`_windowed_epsilons` (the machine's cores, at most 2)."""


def _window_epsilon(circ: np.ndarray, a: int, b: int, size: int, *, w_l0: float, h: float, target: float) -> float:
    """:func:`_epsilon_from_pmf` of the window ``[a, b]`` (indices of the full support) of a circular w-fold law."""
    lo_i, hi_i = a % size, a % size + (b - a)                                  # window, circularly
    win = np.maximum(circ[lo_i:hi_i + 1] if hi_i < size else
                     np.concatenate([circ[lo_i:], circ[:hi_i + 1 - size]]), 0.0)
    return _epsilon_from_pmf(win, w_l0 + a * h, h, target)
