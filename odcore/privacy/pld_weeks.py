"""Many weekly releases: the exact weekly privacy-loss law of the k-fold Laplace mechanism
(:mod:`odcore.privacy.pld`), discretised with guaranteed rounding and composed over weeks by FFT (scipy).

- ``composed_epsilon_bounds(delta, k, epsilon, weeks)``: a bracket ``[lo, hi]`` on the tight ε' of ``weeks``
  weekly releases at ``delta``; ``composed_epsilon_curve`` the same for many numbers of weeks at once.
"""

from __future__ import annotations

import math
import os
from functools import lru_cache

import numpy as np
from scipy import fft
from scipy.signal import lfilter

from odcore.errors import ParameterError, check_positive
from odcore.privacy.pld import (
    LaplaceKFold,
    bernstein_eval,
    check_epsilon,
    check_k_array,
    gauss_legendre,
    laws_by_k,
)

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
    x, w = gauss_legendre(8)
    deg = k - 1
    chunk = max(1, 4_000_000 // (8 * (deg + 1)))
    for lo in range(0, a.size, chunk):
        sl = slice(lo, lo + chunk)
        width = b[sl] - a[sl]
        s_loc = (a[sl] - m[sl])[:, None] + width[:, None] * x[None, :]               # (P, 8) in [0, 1]
        pm = bernstein_eval(st.coef[m[sl]], s_loc)                                   # (P, 8)
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
    >>> from odcore.privacy.pld import epsilon_for_delta
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

    eps = check_epsilon(epsilon)
    try:
        d = float(delta)
    except (TypeError, ValueError):
        raise ParameterError(f"delta must be in (0, 1), got delta={delta!r}.") from None
    if not 0.0 < d < 1.0:
        raise ParameterError(f"delta must be in (0, 1), got delta={delta!r}.")
    kk = int(check_k_array(k))
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
    out = _loss_bin_masses(laws_by_k(np.array([k]), epsilon)[k], h)
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
