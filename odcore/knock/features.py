"""Per-ROI statistics of aggregate time-series, vectorised over groups (Pyrgelis et al. 2018, §V-B).

For each ROI's time-series over the period: variance, minimum, maximum, median, mean, standard deviation and sum
(the seven tsfresh statistics the paper uses), giving ``7 × ROIs`` features (707 for the SFC grid). Variance and
standard deviation are the population versions (``ddof=0``), as in tsfresh.
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np
from sklearn.feature_selection import RFE
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from odcore.errors import ParameterError

#: Feature order within each ROI block (tsfresh names: variance, minimum, maximum, median, mean,
#: standard_deviation, sum_values).
STATS: tuple[str, ...] = ("variance", "minimum", "maximum", "median", "mean", "standard_deviation", "sum_values")


def extract_features(agg: np.ndarray, *, chunk: int = 256) -> np.ndarray:
    """Features of ``agg`` ``(n_groups, n_rois, T)`` -> ``(n_groups, 7·n_rois)`` float64.

    Columns are stat-major: column ``k·n_rois + s`` is statistic ``STATS[k]`` of ROI ``s``
    (see :func:`feature_names`). Reductions run over the time axis for all groups at once, in chunks of
    ``chunk`` groups to bound memory.

    >>> a = np.array([[[1., 2., 3.], [0., 0., 4.]]])
    >>> extract_features(a).reshape(7, 2)[:, 0].round(3).tolist()
    [0.667, 1.0, 3.0, 2.0, 2.0, 0.816, 6.0]
    """
    a = np.asarray(agg)
    if a.ndim != 3:
        raise ParameterError(f"aggregates must be (n_groups, n_rois, T), got shape {a.shape}.")
    n, s, t = a.shape
    if t < 1:
        raise ParameterError("aggregates have an empty time axis (T = 0).")
    out = np.empty((n, 7 * s), dtype=np.float64)
    for i in range(0, n, chunk):
        x = a[i:i + chunk].astype(np.float64, copy=False)
        mean = x.mean(axis=2)
        var = np.maximum((x * x).mean(axis=2) - mean * mean, 0.0) if t > 1 else np.zeros_like(mean)
        blk = out[i:i + chunk].reshape(-1, 7, s)
        blk[:, 0] = var
        blk[:, 1] = x.min(axis=2)
        blk[:, 2] = x.max(axis=2)
        blk[:, 3] = np.median(x, axis=2)
        blk[:, 4] = mean
        blk[:, 5] = np.sqrt(var)
        blk[:, 6] = x.sum(axis=2)
    return out


def feature_names(roi_labels: list[str] | tuple[str, ...]) -> list[str]:
    """Names matching :func:`extract_features` columns, e.g. ``"mean__r3c4"``."""
    return [f"{st}__{r}" for st in STATS for r in roi_labels]


class Selection(StrEnum):
    """Feature selection before classification (§V-B).

    ``rfe`` is the paper's setting: recursive feature elimination (logistic-regression ranking, one feature per
    step) down to the number of training samples; it costs hundreds of fits per target. ``rfe-fast`` removes 10% of
    the remaining features per step (a few dozen fits). ``variance`` (default) only drops features that are constant
    in the training set (exactly uninformative; cheap). ``none`` keeps all.
    """

    NONE = "none"
    VARIANCE = "variance"
    RFE = "rfe"
    RFE_FAST = "rfe-fast"


def select_features(x_train: np.ndarray, y_train: np.ndarray, method: Selection | str = Selection.VARIANCE
                    ) -> np.ndarray:
    """Boolean mask of kept feature columns, fitted on the training set only (deterministic)."""
    method = Selection(method)
    x = np.asarray(x_train, dtype=float)
    keep = np.ones(x.shape[1], dtype=bool)
    if method == Selection.NONE:
        return keep
    keep = x.max(axis=0) > x.min(axis=0)
    if not keep.any():
        keep[:] = True  # nothing varies: keep all, the classifiers will be at chance anyway
        return keep
    if method == Selection.VARIANCE:
        return keep
    n_target = min(x.shape[0], int(keep.sum()))
    if int(keep.sum()) <= n_target:
        return keep
    xs = StandardScaler().fit_transform(x[:, keep])
    step = 1 if method == Selection.RFE else 0.1
    rfe = RFE(LogisticRegression(solver="liblinear"), n_features_to_select=n_target, step=step)
    rfe.fit(xs, y_train)
    idx = np.flatnonzero(keep)
    keep[:] = False
    keep[idx[rfe.support_]] = True
    return keep
