"""AUC, privacy loss (Eq. 3), privacy gain (Eq. 6), MRE (Eq. 7) and target sampling (Pyrgelis et al. 2018)."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import roc_auc_score, roc_curve

from odcore.errors import ParameterError


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve of ``scores`` for binary ``labels`` (1 = target in the group), §IV-C."""
    y = np.asarray(labels)
    if len(np.unique(y)) < 2:
        raise ParameterError("AUC needs both in- and out-groups in the test set.")
    return float(roc_auc_score(y, np.asarray(scores, dtype=float)))


def roc(labels: np.ndarray, scores: np.ndarray) -> dict[str, list[float]]:
    """ROC curve points ``{"fpr": [...], "tpr": [...]}`` (§IV-C)."""
    fpr, tpr, _ = roc_curve(np.asarray(labels), np.asarray(scores, dtype=float))
    return {"fpr": fpr.round(6).tolist(), "tpr": tpr.round(6).tolist()}


def privacy_loss(auc_value: float | np.ndarray) -> float | np.ndarray:
    """PL = (AUC − 0.5)/0.5 if AUC > 0.5 else 0 (Eq. 3).

    >>> privacy_loss(0.9), privacy_loss(0.4)
    (0.8, 0.0)
    """
    a = np.asarray(auc_value, dtype=float)
    pl = np.where(a > 0.5, (a - 0.5) / 0.5, 0.0)
    return float(np.round(pl, 12)) if pl.ndim == 0 else pl


def privacy_gain(auc_raw: float | np.ndarray, auc_noisy: float | np.ndarray, *, literal: bool = False
                 ) -> float | np.ndarray:
    """Privacy gain of a defence, Eq. 6: the relative drop of the AUC towards the random-guess baseline 0.5.

    PG = (AUC_A − AUC_A')/(AUC_A − 0.5) if AUC_A > AUC_A' >= 0.5, else 0, as printed. Taken literally, a noisy AUC
    that falls just *below* 0.5 (a random guess, which happens for about half of the targets under strong noise)
    gives PG = 0, contradicting the paper's own reading ("how much the adversary's inference power deteriorates
    towards the random guess baseline", PG ≈ 1 for LPA in Fig. 12). By default we therefore floor AUC_A' at 0.5
    (PG = 1 for any AUC_A' <= 0.5 when AUC_A > 0.5); ``literal=True`` gives the printed formula.

    >>> privacy_gain(1.0, 0.75), privacy_gain(1.0, 0.45), privacy_gain(1.0, 0.45, literal=True)
    (0.5, 1.0, 0.0)
    """
    a = np.asarray(auc_raw, dtype=float)
    b = np.asarray(auc_noisy, dtype=float)
    if not literal:
        b = np.maximum(b, 0.5)
    with np.errstate(divide="ignore", invalid="ignore"):
        pg = np.where((a > b) & (b >= 0.5), (a - b) / (a - 0.5), 0.0)
    return float(np.round(pg, 12)) if pg.ndim == 0 else pg


def mre_denominator(true: np.ndarray, *, gamma_fraction: float = 0.001, scope: str = "series"
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``max(γ, Y_i)`` of :func:`mre` and the mask of series whose γ is 0 (MRE undefined); reusable for many noisy
    versions of the same ``true``."""
    y = np.asarray(true, dtype=float)
    if scope == "series":
        gamma = gamma_fraction * y.sum(axis=-1, keepdims=True)
    elif scope == "matrix":
        if y.ndim < 2:
            raise ParameterError("scope='matrix' needs (..., ROI, T) arrays.")
        gamma = np.broadcast_to(gamma_fraction * y.sum(axis=(-2, -1), keepdims=True), (*y.shape[:-1], 1))
    else:
        raise ParameterError(f"scope must be 'series' or 'matrix', got scope={scope!r}.")
    return np.maximum(gamma, y), np.squeeze(gamma, -1) <= 0


def mre(true: np.ndarray, noisy: np.ndarray, *, gamma_fraction: float = 0.001, scope: str = "series",
        denominator: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Mean relative error of each series along the last axis (Eq. 7).

    ``MRE(Y, Y') = mean_i |Y'_i − Y_i| / max(γ, Y_i)`` with γ = ``gamma_fraction`` (0.1%, after Ács &
    Castelluccia) of the series' sum (``scope="series"``, the paper's wording) or of the sum of the whole released
    matrix, i.e. the last two axes ROI × T (``scope="matrix"``, Ács & Castelluccia's population-wide bound).
    Series whose γ is 0 (all-zero series) have no defined MRE and give NaN (callers count them).
    ``denominator``: :func:`mre_denominator` of ``true`` if already computed.

    >>> round(float(mre(np.array([[10., 0., 10.]]), np.array([[11., 1., 10.]]), gamma_fraction=0.1)[0]), 6)
    0.2
    """
    y = np.asarray(true, dtype=float)
    z = np.asarray(noisy, dtype=float)
    if y.shape != z.shape:
        raise ParameterError(f"true and noisy series differ in shape: {y.shape} vs {z.shape}.")
    den, undefined = (mre_denominator(y, gamma_fraction=gamma_fraction, scope=scope) if denominator is None
                      else denominator)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.abs(z - y) / den
    out = r.mean(axis=-1)
    out[undefined] = np.nan
    return out


def cdf(values: np.ndarray) -> dict[str, list[float]]:
    """Empirical CDF ``{"x": sorted values, "p": i/n}`` (the paper's Fig. 2/4 view of AUC over targets)."""
    v = np.sort(np.asarray(values, dtype=float))
    return {"x": v.tolist(), "p": (np.arange(1, len(v) + 1) / max(len(v), 1)).tolist()}


def sample_targets(reports: np.ndarray, n_targets: int, rng: np.random.Generator | int | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Targets sampled equally from the highly / mildly / somewhat mobile thirds (§V-A "Sampling Users").

    Users are sorted by number of ROI reports and split into three groups of (nearly) equal size; ``n_targets``
    users are drawn at random, ``n_targets // 3`` from each third (the remainder from the most mobile thirds first).

    Returns
    -------
    (indices, classes)
        User indices and their class label (``"high"``, ``"mild"``, ``"somewhat"``), grouped by class.
    """
    rng = np.random.default_rng(rng)
    r = np.asarray(reports)
    n = len(r)
    if int(n_targets) != n_targets or n_targets < 1:
        raise ParameterError(f"targets must be an integer >= 1, got targets={n_targets!r}.")
    if n_targets > n:
        raise ParameterError(f"targets={n_targets} exceeds the {n} users.")
    order = np.argsort(-r, kind="stable")  # most reports first
    thirds = np.array_split(order, 3)
    base, extra = divmod(int(n_targets), 3)
    idx, cls = [], []
    for j, (name, part) in enumerate(zip(("high", "mild", "somewhat"), thirds, strict=True)):
        k = base + (1 if j < extra else 0)
        if k > len(part):
            raise ParameterError(f"targets={n_targets} needs {k} users from the {name} third, which has {len(part)}.")
        pick = rng.choice(part, size=k, replace=False)
        idx.append(np.sort(pick))
        cls += [name] * k
    return np.concatenate(idx).astype(np.int64), np.array(cls)
