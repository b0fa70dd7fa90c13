"""The membership attack of Houssiau et al. 2022 against weekly OD releases, exactly and by simulation.

Model (Houssiau et al. 2022, Methods, "Performing the attack"): the attacker knows every record but the victim's and
the victim's ``k`` unique weekly trips. Subtracting the known counts leaves ``k`` coordinates, each
``Lap(0, 1/ε)`` (victim out) or ``Lap(1, 1/ε)`` (victim in); a likelihood-ratio test decides. What this module gives:

- The closed forms, from :mod:`odcore.privacy.attack_curve` (numpy only; named here too): :func:`success_curve`
  (the exact success ``p_k`` of the optimal attacker), :func:`simulate_attack` (the paper's Monte Carlo),
  :func:`bayes_success`, :func:`posterior_bound` (priors other than ½), :func:`roc_plain`, :func:`tpr_at_fpr`.
- :func:`bounded_success_curve`: the success against the per-person release, thresholded or not.
- Beyond the paper — the attack against a real, thresholded release: :func:`pair_loss_pmf`, :func:`user_risk`,
  :func:`week_risk`, :func:`risk_summary`. Each of the victim's pairs is observed as "suppressed" or as its noisy
  count, under "out" (others' true count ``c``) and "in" (``c + 1``); the optimal test's success is
  ``½ + ½·TV`` of the two product distributions, computed from the privacy-loss distribution of the pairs.

How the thresholded model is computed, and how exact it is
----------------------------------------------------------
Per pair, the privacy loss ``log(p_out/p_in)`` of an observation lies in ``[−ε, ε]``: atoms at ``+ε`` (published,
noisy value ≤ c), ``−ε`` (published, ≥ c + 1), a continuous part in between (published, between) and one atom
``ℓ = log(P_out(suppressed)/P_in(suppressed)) ∈ [0, ε]``. Each pair's loss law is put on the grid
``h·Z`` with ``h = ε/resolution`` by *connect-the-dots* (Doroshenko et al. 2022): the mass of every loss value
is split between the two neighbouring grid points so that both its P-mass and its Q-mass (``e^{−l}``·P-mass) are
kept. The discretised pair dominates the true one (the true pair is a post-processing of it), so the
connect-the-dots success is an upper bound; its error is mostly ``c/R²`` (R = grid points per ε), so
:func:`user_risk` computes it at R and R/2 and Richardson-extrapolates (measured error ~1e-7 at R = 256, and
exactly the :mod:`odcore.privacy.pld` curve, to 1e-13, when no pair is ever suppressed), and also returns a rigorous
bracket ``[success_low, success_high]`` (round-down discretisation / connect-the-dots). Pairs of a user are composed
by FFT; pairs with the same others' count share a spectrum. :func:`week_risk` (the population view) groups users by
their multiset of pair types, and evaluates ``TV = Σ_j P_j (1 − e^{−l_j})₊`` in the frequency domain (Parseval), so
each distinct user costs one sparse product of log-spectra and one complex exponential per frequency — no inverse
FFT and no Python loop over users. Its accuracy/speed trade-off is set by ``resolution``/``extrapolate`` (see there).

Two documented simplifications, both with an error bound returned per user (``error_bound``):
- "silent" pairs (far below the threshold, per-pair TV < ``tol``) are left out: by sub-additivity of TV over
  products the success changes by at most ½·Σ of their TVs;
- pairs far above the threshold (suppression probability < ``tol``) are treated as never suppressed, changing the
  success by at most ½·Σ (P_out(suppressed) + P_in(suppressed)).

References
----------
Houssiau, Rocher, de Montjoye (2022), Nature Communications 13:29 — Methods, Fig. 1.
Doroshenko, Ghazi, Kamath, Kumar, Manurangsi (2022), "Connect the Dots: Tighter Discrete Approximations of Privacy
Loss Distributions", PETS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import fft as sfft
from scipy import sparse

from odcore.constants import COUNT, DESTINATION, ORIGIN, USER, WEEK
from odcore.errors import ParameterError, check_max_pairs, check_positive
from odcore.privacy.accounting import partition_selection_delta
from odcore.privacy.attack_curve import (
    ROC,
    SimulationResult,
    bayes_success,
    cached_success_curve,
    check_k_max,
    check_prior,
    posterior_bound,
    roc_plain,
    simulate_attack,
    success_curve,
    tpr_at_fpr,
    tpr_curve,
    user_level_success_curve,
    wilson_interval,
)

__all__ = [
    "ROC",
    "SimulationResult",
    "UserRisk",
    "bayes_success",
    "bounded_success_curve",
    "integer_codes",
    "integer_ranks",
    "pair_llr",
    "pair_loss_pmf",
    "person_others",
    "posterior_bound",
    "risk_by_origin",
    "risk_summary",
    "roc_plain",
    "simulate_attack",
    "success_curve",
    "tpr_at_fpr",
    "tpr_curve",
    "user_level_success_curve",
    "user_risk",
    "week_risk",
    "wilson_interval",
]

DEFAULT_RESOLUTION = 256   # grid points per ε for the thresholded model (single user)
POPULATION_RESOLUTION = 16  # per ε for a whole week (fast: error <= ~5e-5, upward; see week_risk)
DEFAULT_TOL = 1e-10        # per-pair tolerance for "silent" / "never suppressed" pairs


# ---------------------------------------------------------------------------------------------------------------
# Contribution-bounded release
# ---------------------------------------------------------------------------------------------------------------

def bounded_success_curve(epsilon: float, max_pairs: int, n_max: int, threshold: float | None = None) -> np.ndarray:
    """Success of the best membership attacker against the contribution-bounded (per-person) release, n = 0..n_max.

    Without ``threshold``: :func:`odcore.privacy.attack_curve.user_level_success_curve` (the ``min(n, m)``-fold
    Laplace(ε/m) pair; flat from n = m on). With ``threshold`` the release is also thresholded; the attacker sees
    the published pairs only, and the success is at most the value above plus ½·δ_ps, the chance that a pair only
    this person makes is published (:func:`odcore.privacy.accounting.partition_selection_delta`; TV is sub-additive
    and thresholding is post-processing): that upper bound is returned.

    Examples
    --------
    >>> c = bounded_success_curve(0.66, 20, 40)
    >>> round(float(c[20]), 4) == round(float(c[40]), 4)
    True
    """
    out = user_level_success_curve(epsilon, max_pairs, n_max)
    if threshold is not None:
        m = check_max_pairs(max_pairs)
        n = np.minimum(np.arange(out.size), m)
        out = np.where(n > 0, np.minimum(out + 0.5 * partition_selection_delta(epsilon, threshold, m), 1.0), out)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Thresholded release: per-pair privacy-loss distributions on a grid
# ---------------------------------------------------------------------------------------------------------------

def _log_laplace_cdf(x: np.ndarray, eps: float) -> np.ndarray:
    """``log P(X < x)`` for ``X ~ Lap(0, 1/ε)``, stable at both tails (x may be ±inf)."""
    x = np.asarray(x, dtype=float)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        neg = math.log(0.5) + eps * np.minimum(x, 0.0)
        pos = np.log1p(-0.5 * np.exp(-eps * np.maximum(x, 0.0)))
    return np.where(x <= 0, neg, pos)


def pair_loss_pmf(others_count, epsilon: float, threshold: float, *, resolution: int = DEFAULT_RESOLUTION,
                  method: str = "connect_dots") -> np.ndarray:
    """P-masses (victim out) of one pair's privacy loss on the grid ``l_i = (i − R)·ε/R``, ``i = 0..2R``.

    For others' true count ``c`` and threshold ``τ`` (published iff noisy count ``>= τ``), with ``d = τ − c`` and
    ``x`` = noisy count − c (``Lap(0, 1/ε)`` out, ``Lap(1, 1/ε)`` in), the observation is "suppressed" if
    ``x < d`` — loss ``ℓ = log(F(d)/F(d − 1))`` with ``F`` the Laplace CDF — else ``x`` with loss
    ``ε(|x − 1| − |x|)``: an atom at ``+ε`` of P-mass ``P(d <= x <= 0)``, a density ``¼·e^{(l−ε)/2}`` on
    ``(−ε, ε(1 − 2·max(d, 0)))`` and an atom at ``−ε`` of P-mass ``½e^{−ε·max(d, 1)}``.

    ``method="connect_dots"`` splits every loss between its two grid neighbours keeping P- and Q-masses (pessimistic,
    second-order accurate); ``"round_down"`` puts it on the lower neighbour (a rigorous lower bound for δ and TV).
    ``others_count`` may be ``inf`` (never suppressed: the plain Laplace coordinate). Vectorised: returns an array
    of shape ``(len(others_count), 2R + 1)``.
    """
    eps = check_positive("epsilon", epsilon)
    tau = check_positive("threshold", threshold)
    R = int(resolution)
    if R < 2:
        raise ParameterError(f"resolution must be an integer >= 2, got resolution={resolution!r}.")
    if method not in ("connect_dots", "round_down"):
        raise ParameterError(f"method must be 'connect_dots' or 'round_down', got method={method!r}.")
    c = np.atleast_1d(np.asarray(others_count, dtype=float))
    if np.any(np.isnan(c)) or np.any(c < 0):
        raise ParameterError("others_count must be >= 0 (true count of the pair minus the victim).")
    return _pmf_rows(c, np.full(c.shape, eps), np.full(c.shape, tau), R, method == "connect_dots")


def _pmf_rows(c: np.ndarray, eps: np.ndarray, tau: np.ndarray, R: int, ctd: bool) -> np.ndarray:
    """:func:`pair_loss_pmf` with its own ε and τ on each row (``c``, ``eps``, ``tau``: one value per row; checked by
    the callers): one call for a person's pairs at every ε of a grid."""
    d = tau - c                                   # -inf for c = inf
    h = eps / R
    e = eps[:, None]
    grid = (np.arange(2 * R + 1) - R)[None, :] * h[:, None]
    out = np.zeros((c.size, 2 * R + 1))
    # atom +ε (published, x in [d, 0]) and atom −ε (published, x >= max(d, 1))
    with np.errstate(over="ignore"):
        out[:, 2 * R] += np.where(d < 0, -0.5 * np.expm1(eps * np.minimum(d, 0.0)), 0.0)
        out[:, 0] += 0.5 * np.exp(-eps * np.maximum(d, 1.0))
    # continuous part: P-density ¼ e^{(l − ε)/2} on (−ε, u), u = ε(1 − 2 max(d, 0)) when d < 1
    u = np.where(d < 1, eps * (1.0 - 2.0 * np.maximum(d, 0.0)), -eps)
    lo = np.maximum(grid[:, :-1], -e)
    hi = np.minimum(grid[:, 1:], u[:, None])
    ok = hi > lo
    lo = np.where(ok, lo, 0.0)
    hi = np.where(ok, hi, 0.0)
    m0 = np.where(ok, 0.5 * (np.exp((hi - e) / 2) - np.exp((lo - e) / 2)), 0.0)   # ∫ f
    if ctd:
        # ∫ f e^{-l}, relative to the left grid point: ∫ f e^{-(l − l_j)} = ½ e^{l_j}(e^{-(lo+ε)/2} − e^{-(hi+ε)/2})
        lj = grid[:, :-1]
        m1 = np.where(ok, 0.5 * (np.exp(lj - (lo + e) / 2) - np.exp(lj - (hi + e) / 2)), 0.0)
        # A + B = m0, A + B e^{-h} = m1  =>  B = (m0 − m1)/(1 − e^{-h})
        b = np.clip((m0 - m1) / (-np.expm1(-h))[:, None], 0.0, m0)
        out[:, :-1] += m0 - b
        out[:, 1:] += b
    else:
        out[:, :-1] += m0
    # suppressed atom: P-mass F(d) at loss ℓ = log F(d) − log F(d − 1) in [0, ε]
    log_f_out = _log_laplace_cdf(d, eps)
    log_f_in = _log_laplace_cdf(d - 1.0, eps)
    s_mass = np.exp(log_f_out)
    with np.errstate(invalid="ignore"):
        ell = np.where(s_mass > 0, np.clip(log_f_out - log_f_in, 0.0, eps), 0.0)
    pos = ell / h
    j = np.clip(np.floor(pos).astype(np.int64), 0, R - 1)   # ℓ in [l_{R+j}, l_{R+j+1}]
    frac_l = ell - j * h                                     # distance above the left neighbour
    if ctd:
        w_left = (np.exp(-frac_l) - np.exp(-h)) / (-np.expm1(-h))
        w_left = np.clip(w_left, 0.0, 1.0)
    else:
        w_left = np.ones_like(frac_l)
    rows = np.arange(c.size)
    np.add.at(out, (rows, R + j), s_mass * w_left)
    np.add.at(out, (rows, R + j + 1), s_mass * (1.0 - w_left))
    return out


def pair_llr(others_count, published, noisy_count, epsilon: float, threshold: float) -> np.ndarray:
    """Log-likelihood ratio ``log(P_in(obs) / P_out(obs))`` of what the release shows on each of a victim's pairs.

    The optimal attacker's statistic against a thresholded release, one term per pair (Neyman–Pearson: declare
    "in" when the sum is > 0, "out" when < 0, a fair coin on a tie). With others' true count ``c``, noise
    ``Lap(0, 1/ε)`` and ``x = noisy_count − c``:

    - published (``noisy_count >= τ``): ``ε(|x| − |x − 1|)``, in ``[−ε, ε]`` (exactly ``−ε`` for ``x <= 0`` and
      ``+ε`` for ``x >= 1``, the atoms of :func:`pair_loss_pmf`);
    - suppressed: ``log F(τ − c − 1) − log F(τ − c)`` with ``F`` the Laplace CDF, in ``[−ε, 0]`` (computed in
      log space, so a pair far below the threshold gives a tiny negative number, not 0 or NaN).

    The law of the sum of these terms is what :func:`user_risk` composes exactly; Houssiau et al. 2022, Methods,
    "Performing the attack" (no threshold: every pair published).

    Parameters
    ----------
    others_count:
        True count of the other users on each pair (``c``; array-like, >= 0).
    published:
        Whether each pair was published (bool array, same shape).
    noisy_count:
        The published noisy counts (ignored where ``published`` is False; may be NaN there).
    epsilon, threshold:
        Per-coordinate Laplace parameter (1/scale) and publication threshold τ.

    Examples
    --------
    >>> pair_llr([500, 500], [True, True], [501.3, 499.2], 0.66, 100).round(2).tolist()
    [0.66, -0.66]
    >>> bool(pair_llr([10], [False], [float("nan")], 0.66, 100)[0] < 0)
    True
    """
    eps = check_positive("epsilon", epsilon)
    tau = check_positive("threshold", threshold)
    c = np.atleast_1d(np.asarray(others_count, dtype=float))
    pub = np.atleast_1d(np.asarray(published, dtype=bool))
    y = np.atleast_1d(np.asarray(noisy_count, dtype=float))
    if not (c.shape == pub.shape == y.shape):
        raise ParameterError(f"others_count, published and noisy_count must have the same shape, got {c.shape}, "
                             f"{pub.shape} and {y.shape}.")
    if np.any(~np.isfinite(c)) or np.any(c < 0):
        raise ParameterError("others_count must be finite counts >= 0 (true count minus the victim).")
    if np.any(pub & ~np.isfinite(y)):
        raise ParameterError("noisy_count must be a finite number wherever published is True.")
    x = np.where(pub, y - c, 0.0)
    # in units of ε: atoms are the exact floats ±1, so a sum of atoms that cancels is an exact 0 (a tie)
    released = np.clip(x, 0.0, 1.0) * 2.0 - 1.0
    d = tau - c
    suppressed = (_log_laplace_cdf(d - 1.0, eps) - _log_laplace_cdf(d, eps)) / eps
    return eps * np.where(pub, released, suppressed)


def _log_laplace_sf(x: np.ndarray, eps: float) -> np.ndarray:
    """``log P(X >= x)`` for ``X ~ Lap(0, 1/ε)`` (the mirror of :func:`_log_laplace_cdf`)."""
    return _log_laplace_cdf(-np.asarray(x, dtype=float), eps)


def pair_errors(others_count: np.ndarray, eps, tau) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: exact TV between "out" and "in" for that pair alone, and ``P_out(supp) + P_in(supp)`` (``eps`` and
    ``tau`` numbers, or arrays that broadcast with the counts: every pair at every setting in one call).

    With ``x`` = noisy − c (P: Lap(0), Q: Lap(1)) and ``d = τ − c``: the densities cross at ``x = ½`` (p > q
    below), so ``TV = ½(|F(d) − F(d−1)| + ∫_{d<=x<½}(p − q) + ∫_{x>=max(d,½)}(q − p))``, each term written with the
    CDF or survival function on the side where it has no cancellation.
    """
    c = np.asarray(others_count, dtype=float)
    d = tau - c

    def cdf(x):
        return np.exp(_log_laplace_cdf(x, eps))

    def sf(x):
        return np.exp(_log_laplace_sf(x, eps))

    with np.errstate(invalid="ignore"):
        supp_diff = np.where(d <= 0.5, cdf(d) - cdf(d - 1.0), sf(d - 1.0) - sf(d))
        a = np.minimum(d, 0.5)
        below = np.where(d < 0.5, (cdf(0.5) - cdf(a)) - (cdf(-0.5) - cdf(a - 1.0)), 0.0)
        b = np.maximum(d, 0.5)
        above = sf(b - 1.0) - sf(b)
    tv = 0.5 * (np.abs(supp_diff) + np.abs(below) + np.abs(above))
    return tv, cdf(d) + cdf(d - 1.0)


# ---------------------------------------------------------------------------------------------------------------
# One user, one week
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class UserRisk:
    """Exact-within-``error_bound`` success of the optimal attack on one user of a thresholded release."""

    k: int                    # unique pairs of the user this week
    k_informative: int        # pairs kept in the computation (not "silent")
    success: float            # ½ + ½·TV (connect-the-dots, Richardson-extrapolated; error ~1e-7 measured)
    success_low: float        # rigorous lower bound (round-down discretisation, minus error_bound)
    success_high: float       # rigorous upper bound (connect-the-dots, plus error_bound)
    error_bound: float        # from silent / never-suppressed simplifications (module docstring)
    effective_k: float        # k of the plain curve with the same success (linear interpolation)
    epsilon: float
    threshold: float
    roc: ROC | None = field(default=None, repr=False)
    success_prior: float | None = None   # Bayes-optimal success for the prior passed to user_risk

    def to_dict(self) -> dict:
        d = {"k": self.k, "k_informative": self.k_informative, "success": self.success,
             "success_low": self.success_low, "success_high": self.success_high, "error_bound": self.error_bound, "effective_k": self.effective_k,
             "epsilon": self.epsilon, "threshold": self.threshold}
        if self.roc is not None:
            d["roc"] = self.roc.to_dict()
        if self.success_prior is not None:
            d["success_prior"] = self.success_prior
        return d


def _classify(others: np.ndarray, eps: float, tau: float, tol: float):
    """Map others' counts to types: silent pairs dropped, never-suppressed pairs merged into ``inf``."""
    tv, supp = pair_errors(others, eps, tau)
    silent = tv < tol
    plain = (~silent) & (supp < tol)
    err = 0.5 * (tv[silent].sum() + supp[plain].sum())
    typ = np.where(plain, np.inf, others.astype(float))
    return typ[~silent], err, silent, plain


@lru_cache(maxsize=8192)
def _pair_pmf_row(others: float, eps: float, tau: float, R: int, method: str) -> np.ndarray:
    """One row of :func:`pair_loss_pmf` (remembered: the users of a week share few distinct counts, and the game
    deals hundreds of rounds on them; read-only)."""
    row = pair_loss_pmf([others], eps, tau, resolution=R, method=method)[0]
    row.setflags(write=False)
    return row


def _compose(type_values: np.ndarray, mult: np.ndarray, eps: float, tau: float, R: int, method: str,
             want_q: bool = False, pm: np.ndarray | None = None):
    """PMF of the total loss (P, and optionally Q) for ``mult[i]`` pairs of type ``type_values[i]`` (``pm``: their
    rows of :func:`pair_loss_pmf`, when already at hand)."""
    K = int(mult.sum())
    n = 2 * K * R + 1
    if pm is None:
        pm = np.stack([_pair_pmf_row(float(v), eps, tau, R, method) for v in type_values])
    size = sfft.next_fast_len(n, real=True)
    spec = sfft.rfft(pm, n=size, axis=1)
    tot = np.prod(spec ** mult[:, None], axis=0)
    p = sfft.irfft(tot, n=size)[:n]
    q = None
    if want_q:
        l_pair = (np.arange(2 * R + 1) - R) * (eps / R)
        qm = pm * np.exp(-l_pair)[None, :]
        qs = np.prod(sfft.rfft(qm, n=size, axis=1) ** mult[:, None], axis=0)
        q = np.clip(sfft.irfft(qs, n=size)[:n], 0.0, None)
    return np.clip(p, 0.0, None), q, K


def _tv_from_p(p: np.ndarray, K: int, R: int, eps: float) -> float:
    loss = (np.arange(p.size) - K * R) * (eps / R)
    pos = loss > 0
    return float(np.sum(p[pos] * -np.expm1(-loss[pos])))


def _effective_k(success, k_hi: int, eps: float) -> np.ndarray:
    curve = cached_success_curve(float(eps), check_k_max(max(int(k_hi), 1)))
    s = np.asarray(success, dtype=float)
    return np.interp(np.minimum(s, curve[-1]), curve, np.arange(curve.size, dtype=float))


def user_risk(others_counts, epsilon: float, threshold: float, *, resolution: int = DEFAULT_RESOLUTION,
              tol: float = DEFAULT_TOL, roc: bool = False, prior: float | None = None) -> UserRisk:
    """Success of the optimal membership attack on one user of a thresholded weekly release.

    Parameters
    ----------
    others_counts:
        For each of the user's unique pairs this week, the true count of the *other* users on it (count − 1).
    epsilon:
        Per-coordinate Laplace parameter (noise scale 1/ε; for user-level releases pass 1/scale).
    threshold:
        Publication threshold τ (published iff noisy count ``>= τ``).
    resolution:
        Grid points per ε of the discretised privacy loss.
    tol:
        Per-pair tolerance for leaving out silent pairs and for never-suppressed pairs (see ``error_bound``).
    roc:
        Also compute the attacker's ROC curve (TPR at each FPR).
    prior:
        Also compute the Bayes-optimal success ``Σ max(π·q, (1−π)·p)`` when the user is in with prior π
        (``success_prior``; connect-the-dots at ``resolution``, without extrapolation).

    Returns
    -------
    UserRisk

    Examples
    --------
    >>> r = user_risk([10_000] * 3, 0.66, 100)       # far above τ: the plain curve
    >>> round(r.success, 4), round(r.effective_k, 2)
    (0.7071, 3.0)
    >>> round(user_risk([0] * 30, 0.66, 100).success, 6)  # far below τ: nothing to learn
    0.5
    """
    eps = check_positive("epsilon", epsilon)
    tau = check_positive("threshold", threshold)
    check_positive("tol", tol)
    others = np.atleast_1d(np.asarray(others_counts, dtype=float))
    if np.any(~np.isfinite(others)) or np.any(others < 0):
        raise ParameterError("others_counts must be finite counts >= 0 (true count minus the victim).")
    k = int(others.size)
    typ, err, _, _ = _classify(others, eps, tau, tol)
    if typ.size == 0:
        r = ROC(np.array([0.0, 1.0]), np.array([0.0, 1.0])) if roc else None
        sp = None if prior is None else max(check_prior(prior), 1.0 - check_prior(prior))
        return UserRisk(k, 0, 0.5, max(0.5 - err, 0.0), min(0.5 + err, 1.0), err, 0.0, eps, tau, r, sp)
    vals, mult = np.unique(typ, return_counts=True)
    R = int(resolution)
    pri = None if prior is None else check_prior(prior)
    p, q, K = _compose(vals, mult, eps, tau, R, "connect_dots", want_q=roc or pri is not None)
    succ_hi = 0.5 + 0.5 * _tv_from_p(p, K, R, eps)          # pessimistic: an upper bound (up to error_bound)
    p_half, _, _ = _compose(vals, mult, eps, tau, R // 2, "connect_dots")
    succ_half = 0.5 + 0.5 * _tv_from_p(p_half, K, R // 2, eps)
    succ = float(np.clip((4.0 * succ_hi - succ_half) / 3.0, 0.5, succ_hi))  # Richardson (error c/R² + O(R⁻⁴))
    p_lo, _, _ = _compose(vals, mult, eps, tau, R, "round_down")
    succ_lo = 0.5 + 0.5 * _tv_from_p(p_lo, K, R, eps)
    eff = float(_effective_k(succ, k, eps)[()])
    r = None
    if roc:
        # declare "in" for the most negative losses first: FPR = cum P, TPR = cum Q
        fpr = np.concatenate([[0.0], np.cumsum(p)])
        tpr = np.concatenate([[0.0], np.cumsum(q)])
        fpr = np.minimum(fpr / fpr[-1], 1.0)
        tpr = np.minimum(tpr / tpr[-1], 1.0)
        r = ROC(np.maximum.accumulate(fpr), np.maximum.accumulate(tpr))
    s_prior = None
    if pri is not None:
        s_prior = float(np.sum(np.maximum(pri * q, (1.0 - pri) * p)) / max(p.sum(), 1e-300))
    return UserRisk(k, int(K), succ, max(succ_lo - err, 0.5 - err), min(succ_hi + err, 1.0), err, eff,
                    eps, tau, r, s_prior)


def success_grid(others_counts, epsilons, thresholds, *, resolution: int = DEFAULT_RESOLUTION,
                 tol: float = DEFAULT_TOL) -> np.ndarray:
    """``user_risk(others_counts, epsilons[i], thresholds[i]).success`` for every ``i``: the same numbers, computed
    without what only :func:`user_risk` returns (the rigorous bounds, the ROC, the effective k) and with each
    setting's pair types in one call of :func:`pair_loss_pmf` and every setting's pairs classified in one call of
    :func:`pair_errors` — over 10× faster than a loop of :func:`user_risk`, for a person's success along a grid of
    ε (the live curve of the Attack page). ``thresholds``: one number, or one per ε.

    >>> bool(abs(success_grid([10_000] * 3, [0.66], 100)[0] - user_risk([10_000] * 3, 0.66, 100).success) < 1e-12)
    True
    """
    eps = np.atleast_1d(np.asarray(epsilons, dtype=float))
    tau = np.broadcast_to(np.asarray(thresholds, dtype=float), eps.shape)
    others = np.atleast_1d(np.asarray(others_counts, dtype=float))
    if np.any(~np.isfinite(others)) or np.any(others < 0):
        raise ParameterError("others_counts must be finite counts >= 0 (true count minus the victim).")
    check_positive("tol", tol)
    for e, t in zip(eps, tau, strict=True):
        check_positive("epsilon", float(e))
        check_positive("threshold", float(t))
    R = int(resolution)
    out = np.full(eps.shape, 0.5)
    # each setting's pair types (as user_risk classifies them), then every setting's laws in one call per resolution
    # and every composition in one batch of FFTs
    # (as _classify, for every setting in one call: each pair's TV and suppression mass at each setting)
    tv_pair, supp = pair_errors(others[None, :], eps[:, None], tau[:, None])
    silent = tv_pair < tol
    typ = np.where((~silent) & (supp < tol), np.inf, others[None, :])
    settings = []
    for i in range(eps.size):
        kept = typ[i, ~silent[i]]
        if kept.size:
            vals, mult = np.unique(kept, return_counts=True)
            settings.append((i, vals, mult))
    if not settings:
        return out
    for c0 in range(0, len(settings), GRID_BATCH):   # a batch of settings at a time (bounded memory)
        part = settings[c0:c0 + GRID_BATCH]
        rows = np.concatenate([np.full(v.size, i) for i, v, _ in part])
        vals = np.concatenate([v for _, v, _ in part])
        mult = np.concatenate([m for _, _, m in part])
        tv = {}
        for r in (R, R // 2):
            pm = _pmf_rows(vals, eps[rows], tau[rows], r, True)
            tv[r] = _tv_batch(pm, rows, mult, eps, [(i, int(m.sum())) for i, _, m in part], r)
        for i, _, _ in part:
            hi, half = 0.5 + 0.5 * tv[R][i], 0.5 + 0.5 * tv[R // 2][i]
            out[i] = float(np.clip((4.0 * hi - half) / 3.0, 0.5, hi))   # as user_risk: Richardson
    return out


GRID_BATCH = 32   # settings of success_grid composed together


def _tv_batch(pm: np.ndarray, rows: np.ndarray, mult: np.ndarray, eps: np.ndarray, totals: list[tuple[int, int]],
              R: int) -> dict[int, float]:
    """:func:`_tv_from_p` of :func:`_compose` for several settings at once: ``pm`` holds every setting's pair-type
    laws (row ``j`` of setting ``rows[j]``, ``mult[j]`` pairs of it); ``totals``: (setting, its number of pairs K).
    One FFT size for all (the largest needed), the products per setting, one batched inverse transform."""
    n_max = max(2 * k * R + 1 for _, k in totals)
    size = sfft.next_fast_len(n_max, real=True)
    spec = sfft.rfft(pm, n=size, axis=1)
    many = mult > 1
    if many.any():   # most types hold one pair: raise only the others to their power
        spec[many] **= mult[many, None]
    # the rows of a setting are consecutive, in the order of ``totals``: one product per run of rows
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    tot = np.multiply.reduceat(spec, starts, axis=0)
    p = np.clip(sfft.irfft(tot, n=size, axis=1), 0.0, None)
    out = {}
    for (i, k), row in zip(totals, p, strict=True):
        out[i] = _tv_from_p(row[:2 * k * R + 1], k, R, float(eps[i]))
    return out


# ---------------------------------------------------------------------------------------------------------------
# A whole week
# ---------------------------------------------------------------------------------------------------------------

def user_pairs_with_counts(pairs: pd.DataFrame, counts: pd.DataFrame | None, week: int) -> tuple[pd.DataFrame, dict]:
    """Each distinct (user, pair) row of ``week`` with the pair's distinct-user ``count`` (from ``counts``, checked
    against ``pairs``; from ``pairs`` when None) and ``others`` = count − 1, the attacker's knowledge of that pair
    in :func:`user_risk`. Returns ``(DataFrame[week, user, origin, destination, count, others], report)``.

    Rows keep the order of ``pairs`` (the first of duplicate rows). Integer ids (as in ``ODData``) take a path of
    array lookups (~10× faster than pandas' drop_duplicates and merge); anything else, and every error, takes the
    pandas formulation, with the same result.
    """
    need = [WEEK, USER, ORIGIN, DESTINATION]
    missing = [c for c in need if c not in pairs.columns]
    if missing:
        raise ParameterError(f"pairs must have columns {need}; missing {missing}.")
    fast = _pairs_with_counts_by_codes(pairs, counts, week)
    if fast is not None:
        return fast
    return _pairs_with_counts_frames(pairs, counts, week)


def integer_ranks(values: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray, int] | None:
    """``(codes, lut, low)``: ``codes`` = those of ``pandas.factorize(values, sort=True)`` (the rank of each value
    among the distinct ``values``) and the table they came from, ``lut[v − low]`` = the rank of ``v`` (−1 for a
    value between them that is absent), made without a hash table or a sort. None unless ``values`` is a non-empty
    signed-integer array spanning fewer than ``limit`` values.

    >>> codes, lut, low = integer_ranks(np.array([7, 3, 7, 5]), 10)
    >>> codes.tolist(), low
    ([2, 0, 2, 1], 3)
    """
    if values.dtype.kind != "i" or values.size == 0:
        return None
    low, high = int(values.min()), int(values.max())
    if high - low >= limit:
        return None
    at = np.subtract(values, low, dtype=np.int64)
    present = np.zeros(high - low + 1, dtype=bool)
    present[at] = True
    lut = np.cumsum(present, dtype=np.int64) - 1
    lut[~present] = -1
    return lut[at], lut, low


def integer_codes(values: np.ndarray, ranks: tuple[np.ndarray, np.ndarray, int]) -> np.ndarray:
    """Rank of each of ``values`` in :func:`integer_ranks`' table (``ranks``: what it returned); −1 for a value not
    in it."""
    _, lut, low = ranks
    at = values.astype(np.int64, copy=False) - low
    inside = (at >= 0) & (at < lut.size)
    return np.where(inside, lut[np.where(inside, at, 0)], -1)


def _signed_int(series) -> bool:
    return isinstance(series.dtype, np.dtype) and series.dtype.kind == "i"


def _pairs_with_counts_by_codes(pairs: pd.DataFrame, counts: pd.DataFrame | None,
                                week: int) -> tuple[pd.DataFrame, dict] | None:
    """:func:`user_pairs_with_counts` by integer codes, or None when that needs the pandas formulation (ids that
    are not signed integers, too many zones for a dense table of pairs, duplicate counts, or any error to report).

    A pair's code is ``rank(origin)·n_destinations + rank(destination)``; a (user, pair) row's key puts the user in
    front. ``pairs`` as ``ODData`` makes them are sorted and distinct, which one pass over the keys tells; otherwise
    duplicates are found by hashing the keys (the first row of each kept, as ``drop_duplicates``).
    """
    if not all(_signed_int(pairs[c]) for c in (WEEK, USER, ORIGIN, DESTINATION)):
        return None
    if counts is not None and not (all(c in counts.columns for c in (WEEK, ORIGIN, DESTINATION, COUNT))
                                   and all(_signed_int(counts[c]) for c in (WEEK, ORIGIN, DESTINATION))
                                   and isinstance(counts[COUNT].dtype, np.dtype)
                                   and counts[COUNT].dtype.kind in "iuf"):
        return None
    cols = {c: pairs[c].to_numpy() for c in (WEEK, USER, ORIGIN, DESTINATION)}
    sel = cols[WEEK] == week
    if not sel.all():
        if not sel.any():
            return None
        cols = {c: v[sel] for c, v in cols.items()}
    n_in = sel.size if sel.all() else int(np.count_nonzero(sel))
    n_rows = cols[USER].size
    o_rank = integer_ranks(cols[ORIGIN], 4 * n_rows + (1 << 20))
    d_rank = integer_ranks(cols[DESTINATION], 4 * n_rows + (1 << 20))
    if o_rank is None or d_rank is None:
        return None
    n_d = int(d_rank[1].max()) + 1
    n_od = (int(o_rank[1].max()) + 1) * n_d
    u = cols[USER].astype(np.int64, copy=False)
    u_low, u_span = int(u.min()), int(u.max()) - int(u.min()) + 1
    if n_od > max(4 * n_rows, 1 << 22) or u_span * n_od >= 2 ** 62:
        return None
    pair = o_rank[0] * n_d + d_rank[0]
    key = (u - u_low) * n_od + pair
    fresh = not sel.all()                                   # ``cols`` are copies, not the caller's columns
    if key.size > 1 and not bool(np.all(key[1:] > key[:-1])):   # not sorted and distinct: drop repeats
        keep = ~pd.Series(key).duplicated(keep="first").to_numpy()
        if not keep.all():
            cols = {c: v[keep] for c, v in cols.items()}
            pair, fresh = pair[keep], True
    own = np.bincount(pair, minlength=n_od)                 # people per pair
    if counts is None:
        count = own[pair]
    else:
        cw = counts[WEEK].to_numpy() == week
        co = integer_codes(counts[ORIGIN].to_numpy()[cw], o_rank)
        cd = integer_codes(counts[DESTINATION].to_numpy()[cw], d_rank)
        known = np.flatnonzero((co >= 0) & (cd >= 0))
        ckey = co[known] * n_d + cd[known]
        at = np.full(n_od, -1, dtype=np.int64)
        at[ckey] = known
        if not np.array_equal(at[ckey], known):             # a pair counted twice: the merge's business
            return None
        row = at[pair]
        if (row < 0).any():
            return None
        count = counts[COUNT].to_numpy()[cw][row]
        if not bool(np.all(count >= own[pair])):             # disagreement (or NaN): reported by the frames path
            return None
    report = {"pairs_rows": n_in, "duplicate_rows_dropped": n_in - pair.size}
    out = {c: v if fresh else v.copy() for c, v in cols.items()}
    out[COUNT] = count
    out["others"] = count.astype(float) - 1.0
    # the columns are this function's own arrays: no block consolidation (a copy of every column)
    return pd.DataFrame(out, copy=False), report


def person_others(pairs: pd.DataFrame, counts: pd.DataFrame | None, week: int, user) -> np.ndarray:
    """The ``others`` of ``user``'s rows of :func:`user_pairs_with_counts` (in that order): the count of the
    *other* people on each of the person's distinct pairs of ``week``, the attacker's knowledge in :func:`user_risk`.

    Reads the person's rows and the rows on their pairs only (a few ms for a week of 10⁵ people, against a whole
    week's table); so only the person's pairs are checked against ``counts``. Ids that are not signed integers, and
    any disagreement on the person's pairs, take :func:`user_pairs_with_counts` (its result, its errors).
    """
    need = [WEEK, USER, ORIGIN, DESTINATION]
    if (any(c not in pairs.columns or not _signed_int(pairs[c]) for c in need)
            or not isinstance(user, (int, np.integer)) or isinstance(user, bool)
            or (counts is not None and not (all(c in counts.columns for c in (WEEK, ORIGIN, DESTINATION, COUNT))
                                            and all(_signed_int(counts[c]) for c in (WEEK, ORIGIN, DESTINATION))
                                            and isinstance(counts[COUNT].dtype, np.dtype)
                                            and counts[COUNT].dtype.kind in "iuf"))):
        return _person_others_of_week(pairs, counts, week, user)
    sel = pairs[WEEK].to_numpy() == week
    if not sel.any():
        return _person_others_of_week(pairs, counts, week, user)   # its error names the weeks present
    u = pairs[USER].to_numpy()
    o, d = pairs[ORIGIN].to_numpy(), pairs[DESTINATION].to_numpy()
    mine = np.flatnonzero(sel & (u == user))
    if mine.size == 0:
        return np.zeros(0)
    # the person's distinct pairs, in the order of their first rows (drop_duplicates)
    mo, md = o[mine].astype(np.int64), d[mine].astype(np.int64)
    d_low, d_span = int(md.min()), int(md.max()) - int(md.min()) + 1
    mkey = (mo - int(mo.min())) * d_span + (md - d_low)
    _, first, inv = np.unique(mkey, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")            # distinct pairs by first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    row_pair = rank[inv]                                 # each of the person's rows -> its distinct pair
    keep = np.zeros(mine.size, dtype=bool)
    keep[first] = True                                   # the first row of each pair (later ones are repeats)
    po, pd_ = mo[first[order]], md[first[order]]         # the distinct pairs, in order

    def on_pairs(oo: np.ndarray, dd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows (of ``oo``, ``dd``) on one of the person's pairs, and which pair."""
        near = np.flatnonzero(np.isin(oo, po))
        near = near[np.isin(dd[near], pd_)]
        if near.size == 0:
            return near, near
        key = oo[near].astype(np.int64) * (1 << 32) + (dd[near].astype(np.int64) - d_low)
        pkey = po * (1 << 32) + (pd_ - d_low)
        srt = np.argsort(pkey)
        at = np.minimum(np.searchsorted(pkey[srt], key), pkey.size - 1)
        hit = pkey[srt][at] == key
        return near[hit], srt[at[hit]]

    if int(np.abs(pd_ - d_low).max()) >= 1 << 31 or int(np.abs(po).max()) >= 1 << 30:
        return _person_others_of_week(pairs, counts, week, user)
    rows, pair_of = on_pairs(np.where(sel, o, np.iinfo(o.dtype).min), d)
    people = pd.DataFrame({"p": pair_of, "u": u[rows]}).drop_duplicates()
    own = np.bincount(people["p"].to_numpy(), minlength=po.size)   # distinct people on each pair
    if counts is None:
        count = own
    else:
        cw = counts[WEEK].to_numpy() == week
        crow, cpair = on_pairs(np.where(cw, counts[ORIGIN].to_numpy(), np.iinfo(o.dtype).min),
                               counts[DESTINATION].to_numpy())
        if crow.size != po.size or np.unique(cpair).size != po.size:   # a pair with no count, or two counts
            return _person_others_of_week(pairs, counts, week, user)
        count = np.empty(po.size, dtype=counts[COUNT].dtype)
        count[cpair] = counts[COUNT].to_numpy()[crow]
        if not bool(np.all(count >= own)):
            return _person_others_of_week(pairs, counts, week, user)
    return count[row_pair[keep]].astype(float) - 1.0


def _person_others_of_week(pairs: pd.DataFrame, counts: pd.DataFrame | None, week: int, user) -> np.ndarray:
    """:func:`person_others` from the whole week's table."""
    df, _ = user_pairs_with_counts(pairs, counts, week)
    return df["others"].to_numpy(dtype=float)[(df[USER] == user).to_numpy()]


def _pairs_with_counts_frames(pairs: pd.DataFrame, counts: pd.DataFrame | None,
                              week: int) -> tuple[pd.DataFrame, dict]:
    """:func:`user_pairs_with_counts` with pandas (drop_duplicates, groupby, merge): any ids, every error."""
    need = [WEEK, USER, ORIGIN, DESTINATION]
    wk = pairs.loc[pairs[WEEK] == week, need]
    if wk.empty:
        weeks = sorted(pd.unique(pairs[WEEK]).tolist())
        raise ParameterError(f"week={week!r} has no pairs; weeks present: {weeks[:20]}.")
    n_in = len(wk)
    wk = wk.drop_duplicates()
    report = {"pairs_rows": n_in, "duplicate_rows_dropped": n_in - len(wk)}
    own = wk.groupby([ORIGIN, DESTINATION], sort=False).size().rename("_n").reset_index()
    if counts is None:
        cnt = own.rename(columns={"_n": COUNT})
    else:
        missing = [c for c in (WEEK, ORIGIN, DESTINATION, COUNT) if c not in counts.columns]
        if missing:
            raise ParameterError(f"counts must have columns week, origin, destination, count; missing {missing}.")
        cnt = counts.loc[counts[WEEK] == week, [ORIGIN, DESTINATION, COUNT]]
        chk = own.merge(cnt, on=[ORIGIN, DESTINATION], how="left")
        bad = chk[COUNT].isna() | (chk[COUNT] < chk["_n"])
        if bad.any():
            row = chk.loc[bad].iloc[0]
            raise ParameterError(
                f"counts for week {week} disagree with pairs on {int(bad.sum())} pair(s), e.g. origin "
                f"{row[ORIGIN]}, destination {row[DESTINATION]}: count {row[COUNT]} < {int(row['_n'])} users in pairs.")
    df = wk.merge(cnt[[ORIGIN, DESTINATION, COUNT]], on=[ORIGIN, DESTINATION], how="left")
    df["others"] = df[COUNT].astype(float) - 1.0
    return df, report


def _unique_rows(mult: sparse.csr_matrix) -> tuple[sparse.csr_matrix, np.ndarray]:
    """Distinct rows of a sparse integer matrix and the row -> distinct-row index (like ``np.unique(axis=0)``).

    Hash-based (two fixed random 64-bit linear hashes, grouped with ``pandas.factorize``), sparse throughout: a
    week of 10⁵ users × hundreds of pair types never becomes a dense matrix. The grouping is verified exactly
    (every row equals its group's representative) and falls back to ``np.unique`` on a hash collision.
    """
    n = mult.shape[0]
    if n == 0:
        return mult.copy(), np.zeros(0, dtype=np.int64)
    weights = np.random.default_rng(0x5EED).integers(1, 2**62, size=(mult.shape[1], 2), dtype=np.int64)
    coo = mult.tocoo()
    h = np.zeros((n, 2), dtype=np.int64)
    with np.errstate(over="ignore"):
        for j in range(2):   # Σ_t mult[u, t]·w[t] modulo 2^64, accumulated per row
            np.add.at(h[:, j], coo.row, coo.data.astype(np.int64) * weights[coo.col, j])
    codes, _ = pd.MultiIndex.from_arrays([h[:, 0], h[:, 1]]).factorize()
    codes = np.asarray(codes, dtype=np.int64)
    first = np.full(codes.max() + 1, -1, dtype=np.int64)
    first[codes[::-1]] = np.arange(n - 1, -1, -1)      # one row of each group
    sig = mult[first]
    if (sig[codes] != mult).nnz:
        dense_sig, inv = np.unique(mult.toarray(), axis=0, return_inverse=True)
        return sparse.csr_matrix(dense_sig), inv.reshape(-1)
    return sig, codes


def _signature_success(sig, types: np.ndarray, eps: float, tau: float, R: int,
                       single: bool = False) -> np.ndarray:
    """½ + ½·TV for each row of ``sig`` (multiplicities of each pair type), connect-the-dots at resolution R.

    ``single``: the per-user products in complex64 (2× faster; adds ~1e-6 rounding error, used in fast mode).
    """
    sig = sparse.csr_matrix(sig)
    sig_k = np.asarray(sig.sum(axis=1)).reshape(-1)
    out = np.full(sig.shape[0], 0.5)
    if types.size == 0:
        return out
    pm_all = pair_loss_pmf(types, eps, tau, resolution=R)
    for kk in np.unique(sig_k[sig_k > 0]):
        rows = np.nonzero(sig_k == kk)[0]
        n = 2 * int(kk) * R + 1
        size = sfft.next_fast_len(n, real=True)
        used = np.nonzero(np.asarray(sig[rows].sum(axis=0)).reshape(-1) > 0)[0]
        spec = sfft.rfft(pm_all[used], n=size, axis=1)
        with np.errstate(divide="ignore"):
            logspec = np.log(spec)
        # TV = Σ_j P_j·(1 − e^{−l_j})₊ evaluated in the frequency domain (Parseval): no inverse FFT per user
        loss = (np.arange(size) - int(kk) * R) * (eps / R)
        w = np.where((loss > 0) & (np.arange(size) < n), -np.expm1(-np.abs(loss)), 0.0)
        wf = np.conj(sfft.rfft(w))
        wf[1:] *= 2.0
        if size % 2 == 0:
            wf[-1] *= 0.5
        wf /= size
        ftype = np.float32 if single else np.float64
        if single:
            logspec = logspec.astype(np.complex64)
            wf = wf.astype(np.complex64)
        batch = max(1, int(2_000_000 // wf.size))
        for s in range(0, rows.size, batch):
            rr = rows[s:s + batch]
            nsub = sig[rr][:, used].astype(ftype)
            tot = np.exp(nsub @ logspec)
            out[rr] = 0.5 + 0.5 * np.clip((tot @ wf).real, 0.0, 1.0)
    return out


def week_risk(pairs: pd.DataFrame, week: int, epsilon: float, threshold: float, *,
              counts: pd.DataFrame | None = None, resolution: int = POPULATION_RESOLUTION,
              tol: float = DEFAULT_TOL, extrapolate: bool = False) -> tuple[pd.DataFrame, dict]:
    """Attack success for every user of one week of a thresholded release (the population view).

    Parameters
    ----------
    pairs:
        DataFrame[week, user, origin, destination], one row per unique (user, pair) (``ODData.pairs``; for a
        user-level release pass the bounded pairs of :func:`odcore.od.pairs.bound_contributions`).
    week:
        Week number.
    epsilon, threshold:
        Per-coordinate Laplace parameter (1/scale) and publication threshold.
    counts:
        DataFrame[week, origin, destination, count] (``ODData.counts``); computed from ``pairs`` when omitted.
    resolution, tol:
        As in :func:`user_risk` (the grid is coarser by default: the population view runs on every slider move).
    extrapolate:
        Also compute at ``2·resolution`` and Richardson-extrapolate (the connect-the-dots error is mostly
        ``c/R²``; the suppressed atoms add a part that oscillates with their position on the grid, which
        extrapolation does not remove). Measured max error vs :func:`user_risk`: ~3.5e-5 at resolution 16
        without extrapolation (the default, for the dashboard's slider; upward, connect-the-dots is pessimistic),
        ~5e-6 at 16 with it, 1.5e-6–9e-6 at 32 with it (9e-6 on the bundled city at τ = 10), ~5e-7 at 64 with
        it (the CLI's default).

    Returns
    -------
    (pandas.DataFrame, dict)
        One row per user: ``user, k, k_informative, success, error_bound, effective_k``; and a report
        (rows, duplicates dropped, users, distinct signatures computed).

    Notes
    -----
    Users with the same multiset of pair types (others' count, with silent pairs left out and never-suppressed
    pairs merged) get the same answer, so each distinct signature is computed once; users are grouped by their
    number of informative pairs and composed in batches (one matrix product of log-spectra, one batched inverse
    FFT), so there is no Python loop over users.
    """
    eps = check_positive("epsilon", epsilon)
    tau = check_positive("threshold", threshold)
    R = int(resolution)
    df, report = user_pairs_with_counts(pairs, counts, week)
    others = df["others"].to_numpy(dtype=float)
    uniq_c, inv_c = np.unique(others, return_inverse=True)
    tv, supp = pair_errors(uniq_c, eps, tau)
    silent_c = tv < tol
    plain_c = (~silent_c) & (supp < tol)
    pair_err = np.where(silent_c, 0.5 * tv, np.where(plain_c, 0.5 * supp, 0.0))
    type_val = np.where(plain_c, np.inf, uniq_c)
    types, type_of_c = np.unique(type_val, return_inverse=True)
    n_types = types.size
    ucodes, user_idx = np.unique(df[USER].to_numpy(), return_inverse=True)
    n_users = ucodes.size
    k = np.bincount(user_idx, minlength=n_users)
    err = np.bincount(user_idx, weights=pair_err[inv_c], minlength=n_users)
    informative = ~silent_c[inv_c]
    # multiplicity matrix users × types (informative pairs only)
    t_idx = type_of_c[inv_c][informative]
    mult = sparse.csr_matrix((np.ones(t_idx.size, dtype=np.int64), (user_idx[informative], t_idx)),
                             shape=(n_users, n_types))
    mult.sum_duplicates()
    k_inf = np.asarray(mult.sum(axis=1)).reshape(-1)
    # distinct signatures
    sig, sig_inv = _unique_rows(mult)
    if extrapolate:
        coarse = _signature_success(sig, types, eps, tau, R)
        fine = _signature_success(sig, types, eps, tau, 2 * R)
        sig_succ = np.clip((4.0 * fine - coarse) / 3.0, 0.5, 1.0)   # Richardson: CTD error is c/R² + O(R⁻⁴)
    else:
        sig_succ = _signature_success(sig, types, eps, tau, R, single=True)
    success = np.minimum(sig_succ[sig_inv], 1.0)
    eff = _effective_k(success, int(k.max()), eps)
    out = pd.DataFrame({USER: ucodes, "k": k, "k_informative": k_inf, "success": success,
                        "error_bound": err, "effective_k": np.minimum(eff, k)})
    report.update({"users": int(n_users), "signatures": int(sig.shape[0]), "pair_types": int(n_types),
                   "pairs": int(others.size), "pairs_silent": int(np.sum(silent_c[inv_c])),
                   "pairs_never_suppressed": int(np.sum(plain_c[inv_c])),
                   "epsilon": eps, "threshold": tau, "week": int(week), "resolution": R})
    return out, report


def risk_by_origin(pairs: pd.DataFrame, risk: pd.DataFrame, week: int) -> pd.DataFrame:
    """Per origin zone, the attack success (:func:`week_risk`) of the people of ``week`` who start a trip there.

    A person counts in every zone where one of their (``pairs``: kept) pairs of the week starts, once per zone.
    Returns ``DataFrame[origin, people, median, p90, max]`` (success: the optimal attacker's chance of telling
    whether the person is in the data, at equal priors; 0.5 is a coin flip), one row per origin zone with a pair.
    """
    missing = [c for c in (WEEK, USER, ORIGIN) if c not in pairs.columns]
    missing += [f"risk.{c}" for c in (USER, "success") if c not in risk.columns]
    if missing:
        raise ParameterError(f"risk_by_origin needs pairs[week, user, origin] and risk[user, success]; missing {missing}.")
    wk = pairs.loc[pairs[WEEK].to_numpy() == week, [USER, ORIGIN]].drop_duplicates()
    s = risk.set_index(USER)["success"]
    succ = s.reindex(wk[USER].to_numpy()).to_numpy(dtype=float)
    df = pd.DataFrame({ORIGIN: wk[ORIGIN].to_numpy(), "success": succ}).dropna()
    g = df.groupby(ORIGIN, sort=True)["success"]
    out = pd.DataFrame({"people": g.size(), "median": g.median(), "p90": g.quantile(0.9), "max": g.max()})
    return out.reset_index()


def risk_summary(risk: pd.DataFrame, levels=(0.5, 0.6, 0.7, 0.8, 0.9, 0.95)) -> dict:
    """Distribution of attack success over the users of a week: quantiles and shares above levels."""
    if risk.empty:
        raise ParameterError("risk table is empty: no users in this week.")
    s = risk["success"].to_numpy(dtype=float)
    q = np.quantile(s, [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0])
    return {
        "users": int(s.size),
        "quantiles": dict(zip(["min", "p10", "p25", "median", "p75", "p90", "p99", "max"], q.tolist(),
                              strict=True)),
        "mean_success": float(s.mean()),
        "share_above": {f"{lv:g}": float(np.mean(s > lv)) for lv in levels},
        "share_above_90pct": float(np.mean(s > 0.9)),
        "median_k": float(np.median(risk["k"])),
        "median_effective_k": float(np.median(risk["effective_k"])),
        "max_error_bound": float(risk["error_bound"].max()),
    }
