"""Rényi-DP bound on the k-fold Laplace composition: cheap for any k, shared by accounting and the exact PLD.

Used as the closed-form upper bound beside the tight value (:mod:`odcore.privacy.accounting`) and as the start of
the PLD's Newton solve (:mod:`odcore.privacy.pld`).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from odcore.errors import ParameterError, check_positive, check_prob

RDP_ORDERS = np.concatenate([np.linspace(1.01, 10.0, 300), np.logspace(1.0, 5.0, 300)[1:]])


def check_count(name: str, k) -> np.ndarray:
    """Return ``k`` as int64 array when every entry is a whole number >= 1 (a count of trips, weeks, folds)."""
    arr = np.asarray(k)
    try:
        f = arr.astype(float)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be integer(s) >= 1, got {name}={k!r}.") from None
    if f.size == 0 or not np.all(np.isfinite(f)) or np.any(f < 1) or np.any(f != np.floor(f)):
        raise ParameterError(f"{name} must be integer(s) >= 1, got {name}={k!r}.")
    return f.astype(np.int64)


def rdp_epsilon(delta: float, k, epsilon: float, orders=None):
    """Upper bound on the ε(δ) of the k-fold Laplace(1/ε) composition by Rényi DP (cheap for any k).

    Rényi divergence of order α of Laplace(1/ε) with sensitivity 1 (Mironov 2017, "Rényi Differential Privacy",
    Table II): D_α = 1/(α−1)·log( α/(2α−1)·e^{(α−1)ε} + (α−1)/(2α−1)·e^{−αε} ); it adds up over the k coordinates,
    and converts to (ε', δ)-DP by ε' = k·D_α + log((α−1)/α) − (log δ + log α)/(α−1) (Canonne, Kamath, Steinke
    2020, Prop. 12; Balle et al. 2020, Thm 21), minimised over a grid of orders and capped at k·ε. Always >= the
    tight value (:func:`tight_epsilon`); matched against ``dp_accounting.rdp.RdpAccountant`` in the tests.
    Vectorised over k.
    """
    eps = check_positive("epsilon", epsilon)
    d = check_prob("delta", delta)
    kk = check_count("k", k).astype(float)
    if orders is None:
        rdp, log_ratio, log_a, a_minus_1 = _order_terms(float(eps))
    else:
        a = np.asarray(orders, dtype=float)
        if a.size == 0 or np.any(~(a > 1)) or np.any(~np.isfinite(a)):
            raise ParameterError(f"orders must be finite and > 1, got orders={orders!r}.")
        rdp, log_ratio, log_a, a_minus_1 = _terms(a, float(eps))
    conv = log_ratio - (math.log(d) + log_a) / a_minus_1
    e = np.min(np.multiply.outer(kk, rdp) + conv, axis=-1)
    res = np.clip(np.minimum(e, kk * eps), 0.0, None)
    return float(res) if np.ndim(k) == 0 else res


def _terms(a: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per order α: the Rényi divergence D_α of Laplace(1/ε), log((α−1)/α), log α and α − 1."""
    rdp = np.logaddexp(np.log(a / (2 * a - 1)) + (a - 1) * eps, np.log((a - 1) / (2 * a - 1)) - a * eps) / (a - 1)
    return rdp, np.log((a - 1) / a), np.log(a), a - 1


@lru_cache(maxsize=64)
def _order_terms(eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_terms` at :data:`RDP_ORDERS` (cached: a page asks for one ε's bound at many δ and k; read-only)."""
    out = _terms(RDP_ORDERS, eps)
    for x in out:
        x.setflags(write=False)
    return out
