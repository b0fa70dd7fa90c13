"""Utility of a release: what is published, how wrong it is, and Houssiau et al.'s Atlanta arithmetic.

:func:`release_utility` reads the table of :func:`odcore.privacy.release.release` (columns week, origin, destination,
raw_count, true_count, noise, noisy_count, released, release_prob). "Trips" are user-pair contributions (one user on
one pair in one week), i.e. the sum of the distinct-user counts.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from odcore.constants import NOISY_COUNT, RELEASE_PROB, RELEASED, TRUE_COUNT, WEEK
from odcore.errors import ParameterError, check_int, check_positive, check_threshold
from odcore.od.pairs import RAW_COUNT

__all__ = ["atlanta_arithmetic", "expected_error", "expected_errors", "noise_dominated", "published_error",
           "release_utility", "utility_by_week"]

_NEEDED = (TRUE_COUNT, NOISY_COUNT, RELEASED)


def _check_table(table: pd.DataFrame) -> None:
    if not isinstance(table, pd.DataFrame):
        raise ParameterError(f"released table must be a pandas DataFrame, got {type(table).__name__}.")
    missing = [c for c in _NEEDED if c not in table.columns]
    if missing:
        raise ParameterError(f"released table is missing column(s) {missing}; expected the output of "
                             f"odcore.privacy.release.release(), got columns {list(table.columns)}.")


def _stats(raw: np.ndarray, true: np.ndarray, noisy: np.ndarray, rel: np.ndarray, prob: np.ndarray | None) -> dict:
    n = len(raw)
    pub = rel.astype(bool)
    n_pub = int(pub.sum())
    trips_total = int(raw.sum())
    trips_pub = int(raw[pub].sum())
    out = {
        "pairs_total": n,
        "pairs_published": n_pub,
        "pairs_published_frac": n_pub / n if n else float("nan"),
        "trips_total": trips_total,
        "trips_published": trips_pub,
        "trips_published_frac": trips_pub / trips_total if trips_total else float("nan"),
        "trips_after_bounding": int(true.sum()),
        "noisy_trips_published": float(noisy[pub].sum()) if n_pub else 0.0,
    }
    if n_pub:
        err = noisy[pub] - raw[pub]
        rel_err = np.abs(err) / raw[pub]
        out.update({
            "mean_relative_error": float(rel_err.mean()),
            "median_relative_error": float(np.median(rel_err)),
            "mean_absolute_error": float(np.abs(err).mean()),
            "mean_relative_error_noise_only": float((np.abs(noisy[pub] - true[pub]) / true[pub]).mean()),
        })
    else:
        out.update({"mean_relative_error": float("nan"), "median_relative_error": float("nan"),
                    "mean_absolute_error": float("nan"), "mean_relative_error_noise_only": float("nan")})
    if prob is not None:
        out["pairs_published_expected"] = float(prob.sum())
    return out


def _arrays(table: pd.DataFrame):
    true = table[TRUE_COUNT].to_numpy(dtype=float)
    raw = table[RAW_COUNT].to_numpy(dtype=float) if RAW_COUNT in table.columns else true
    noisy = table[NOISY_COUNT].to_numpy(dtype=float)
    rel = table[RELEASED].to_numpy(dtype=bool)
    prob = table[RELEASE_PROB].to_numpy(dtype=float) if RELEASE_PROB in table.columns else None
    return raw, true, noisy, rel, prob


def noise_dominated(table: pd.DataFrame, threshold: float) -> int:
    """Published pairs whose true count (before bounding) is under ``threshold / 2``: mostly noise.

    >>> t = pd.DataFrame({"true_count": [10, 80, 300], "noisy_count": [101, 120, 310], "released": [True] * 3})
    >>> noise_dominated(t, 100)
    1
    """
    _check_table(table)
    tau = check_threshold(threshold)
    raw = table[RAW_COUNT] if RAW_COUNT in table.columns else table[TRUE_COUNT]
    return int((table[RELEASED].to_numpy(dtype=bool) & (raw.to_numpy(dtype=float) < tau / 2)).sum())


def release_utility(table: pd.DataFrame) -> dict:
    """Summary of what a release publishes and how accurate it is.

    Parameters
    ----------
    table:
        Output of :func:`odcore.privacy.release.release` (at least true_count, noisy_count, released; raw_count and
        release_prob are used when present).

    Returns
    -------
    dict
        ``pairs_total``, ``pairs_published``, ``pairs_published_frac``; ``trips_total`` (sum of the distinct-user
        counts before bounding = user-pair contributions), ``trips_published`` (those on published pairs),
        ``trips_published_frac``, ``trips_after_bounding``, ``noisy_trips_published``; over published pairs
        ``mean_relative_error`` = mean |noisy − raw| / raw (error against the real count, including bounding bias),
        ``median_relative_error``, ``mean_absolute_error``, ``mean_relative_error_noise_only`` (against the
        count the noise was added to); ``pairs_published_expected`` = Σ release_prob. NaN where undefined
        (nothing published).

    Examples
    --------
    >>> import pandas as pd
    >>> t = pd.DataFrame({"true_count": [100, 200, 5], "noisy_count": [110.0, 190.0, 7.0],
    ...                   "released": [True, True, False]})
    >>> u = release_utility(t)
    >>> u["pairs_published"], u["trips_published"], round(u["mean_relative_error"], 3)
    (2, 300, 0.075)
    """
    _check_table(table)
    return _stats(*_arrays(table))


def utility_by_week(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`release_utility` for each week (one row per week, sorted), vectorised with groupby sums.

    Returns
    -------
    DataFrame[week, pairs_total, pairs_published, pairs_published_frac, trips_total, trips_published,
    trips_published_frac, mean_relative_error]
    """
    _check_table(table)
    if WEEK not in table.columns:
        raise ParameterError("released table has no 'week' column; utility_by_week needs it.")
    raw, _true, noisy, rel, _ = _arrays(table)
    pub = rel.astype(bool)
    rel_err = np.where(pub, np.abs(noisy - raw) / np.where(raw > 0, raw, 1.0), 0.0)
    g = pd.DataFrame({WEEK: table[WEEK].to_numpy(), "pairs_total": 1, "pairs_published": pub.astype(np.int64),
                      "trips_total": raw, "trips_published": np.where(pub, raw, 0.0),
                      "rel_err_sum": rel_err}).groupby(WEEK, sort=True).sum()
    out = g.reset_index()
    out["pairs_published_frac"] = out["pairs_published"] / out["pairs_total"]
    out["trips_published_frac"] = out["trips_published"] / out["trips_total"].where(out["trips_total"] > 0)
    out["mean_relative_error"] = out["rel_err_sum"] / out["pairs_published"].where(out["pairs_published"] > 0)
    for c in ("trips_total", "trips_published"):
        out[c] = out[c].astype(np.int64)
    return out[[WEEK, "pairs_total", "pairs_published", "pairs_published_frac", "trips_total", "trips_published",
                "trips_published_frac", "mean_relative_error"]]


def atlanta_arithmetic(published_pairs: int = 46_333, threshold: float = 100, *, population: float = 5_000_000,
                       app_share: float = 0.67, epsilon: float | None = None, alpha: float = 0.05) -> dict:
    """Houssiau et al.'s arithmetic: many published pairs of >= τ users imply many user-trips.

    Houssiau et al. 2022, Methods, "Contribution of each user to the dataset": the Atlanta release has 46,333
    connections of at least 100 trips each; if each user reported exactly one trip, at least 4.6 M people would
    contribute (population 5 M, and only 67% of US phone users use Google Maps as their main navigation app).

    Parameters
    ----------
    published_pairs:
        Number of published OD pairs (46,333 for Atlanta).
    threshold:
        Publication threshold τ (100).
    population, app_share:
        City population (5 M) and share of people who could be in the data (0.67).
    epsilon, alpha:
        Optional: account for the noise. A published pair's true count may be below τ; with Laplace(1/ε) noise,
        all published pairs have true count >= τ − (1/ε)·ln(P/(2α)) simultaneously with probability >= 1 − α
        (union bound over the P pairs, P(noise >= x) = ½·exp(−εx)).

    Returns
    -------
    dict
        ``min_user_trips`` = P·τ (4,633,300), ``min_users_if_one_trip_each`` (same), ``share_of_population``,
        ``max_possible_users`` = population·app_share, ``min_trips_per_possible_user`` (> 1 means users must have
        contributed several trips), and with ``epsilon`` the noise-aware ``min_true_count_per_pair`` and
        ``min_user_trips_noise_aware``.

    Examples
    --------
    >>> a = atlanta_arithmetic()
    >>> a["min_user_trips"]
    4633300
    >>> round(a["min_user_trips"] / 1e6, 1)
    4.6
    """
    pairs = check_int("published_pairs", published_pairs)
    tau = check_threshold(threshold)
    pop = check_positive("population", population)
    share = check_positive("app_share", app_share)
    if share > 1:
        raise ParameterError(f"app_share must be in (0, 1], got app_share={app_share!r}.")
    min_trips = pairs * math.ceil(tau)  # counts are integers: noisy >= tau reads as >= ceil(tau) users
    max_users = pop * share
    out = {
        "published_pairs": pairs,
        "threshold": tau,
        "min_user_trips": min_trips,
        "min_users_if_one_trip_each": min_trips,
        "population": pop,
        "share_of_population": min_trips / pop,
        "app_share": share,
        "max_possible_users": max_users,
        "min_trips_per_possible_user": min_trips / max_users,
    }
    if epsilon is not None:
        eps = check_positive("epsilon", epsilon)
        a = check_positive("alpha", alpha)
        if a >= 1:
            raise ParameterError(f"alpha must be in (0, 1), got alpha={alpha!r}.")
        slack = (1.0 / eps) * math.log(max(pairs, 1) / (2.0 * a)) if pairs else 0.0
        min_true = max(math.ceil(tau - max(slack, 0.0)), 1)
        out.update({"epsilon": eps, "alpha": a, "min_true_count_per_pair": min_true,
                    "min_user_trips_noise_aware": pairs * min_true,
                    "min_trips_per_possible_user_noise_aware": pairs * min_true / max_users})
    return out


def _laplace_tail(s: np.ndarray, b, *, nonneg: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``P(Z >= s)`` and ``E[Z; Z >= s]`` for ``Z ~ Lap(0, b)``, from one exponential per point: the tail is
    ``½e^{−|s|/b}`` for s >= 0 and one minus that below; the partial mean is ``½(s + b)e^{−s/b}`` for s >= 0 and
    ``½(b − s)e^{s/b}`` below, both ``½(|s| + b)e^{−|s|/b}``. ``nonneg``: every s is >= 0 (then |s| is s and the
    tail its first form)."""
    a = s if nonneg else np.abs(s)
    e = -a / b
    np.exp(e, out=e)
    half = 0.5 * e
    mean = 0.5 * (a + b)
    mean *= e
    return (half if nonneg else np.where(s >= 0, half, 1.0 - half)), mean


def _abs_dev_above(a, tail_a, t, tail_t) -> np.ndarray:
    """``E[|Z − a|; Z >= t]`` for ``Z ~ Lap(0, b)`` and ``a >= 0`` (closed form from the two partial moments),
    given ``tail_a`` and ``tail_t``, :func:`_laplace_tail` at ``a`` and at ``t`` (the same b)."""
    (sf_a, um_a), (sf_t, um_t) = tail_a, tail_t
    at_t = t >= a                                      # u = max(t, a) is t: its tail is t's, else a's
    above = np.where(at_t, um_t, um_a)                 # Z >= max(t, a): Z − a
    above -= a * np.where(at_t, sf_t, sf_a)
    between = sf_t - sf_a                              # t <= Z < a (only when t < a): a − Z
    between *= a
    between -= um_t - um_a
    above += np.where(at_t, 0.0, between)
    return above


def shapley_split(total, bounding_alone, noise_alone):
    """The total error split between its two causes so that the parts add up to it: each cause gets the mean of
    what it adds first and what it adds second (the Shapley value of the two), ``((T − N) + B)/2`` and
    ``((T − B) + N)/2`` for total T, bounding alone B and noise alone N.

    The causes partly cancel: a count published only because its noise pushed it over the threshold is too high,
    and bounding, which removes people, pulls it back; so T can be below N alone (a split that reported N beside T
    showed a total smaller than its noise part). Pair by pair ``|Z − c| ≥ ||Z| − c|`` (triangle inequality), so
    both parts are ≥ 0 and neither exceeds the total.

    >>> shapley_split(4.0, 1.0, 4.5)
    (0.25, 3.75)
    """
    return (total - noise_alone + bounding_alone) / 2, (total - bounding_alone + noise_alone) / 2


def expected_errors(raw, true, epsilons, thresholds, sensitivity: float = 1, *, weights=None, scales=None,
                    n_pairs: float | None = None, trips_total=None, split: bool = True) -> dict[str, np.ndarray]:
    """:func:`expected_error` at many settings in one pass of array arithmetic: setting ``i`` is ε ``epsilons[i]``,
    threshold ``thresholds[i]`` and every count times ``scales[i]`` (default 1). The same operations on the same
    numbers as one setting at a time, so the same floats (a test checks them to the bit). Every key of
    :func:`expected_error`, as an array over the settings; without ``split`` only ``pairs_published_expected`` and
    ``relative_error`` (what the designer's searches ask). Inputs are checked by the caller (positive ε and scales,
    thresholds >= 1, ``true <= raw``). ``n_pairs``: as in :func:`expected_error`; ``trips_total``: a number or one
    per setting (default: the scaled raw sum)."""
    raw = np.asarray(raw, dtype=float)
    true = np.asarray(true, dtype=float)
    eps = np.atleast_1d(np.asarray(epsilons, dtype=float))
    tau = np.broadcast_to(np.asarray(thresholds, dtype=float), eps.shape)[:, None]
    sc = (np.ones(eps.shape) if scales is None else np.broadcast_to(np.asarray(scales, dtype=float), eps.shape))
    sc = sc[:, None]
    b = (float(sensitivity) / eps)[:, None]
    w = np.ones_like(raw) if weights is None else np.asarray(weights, dtype=float)
    keep = true > 0
    out: dict[str, np.ndarray] = {}
    if split:
        n_all = float(w.sum()) if n_pairs is None else float(n_pairs)
        trips_all = ((w * (raw[None, :] * sc)).sum(axis=1) if trips_total is None
                     else np.broadcast_to(np.asarray(trips_total, dtype=float), eps.shape))
    raw, true, w = raw[keep][None, :], true[keep][None, :], w[keep]
    if scales is not None:     # times 1 changes no count
        raw, true = raw * sc, true * sc
    # the margin t = τ − true, the release probability, the people cut by bounding, the expected total error
    t = tau - true
    tail_t = _laplace_tail(t, b)
    p = tail_t[0]
    cut = raw - true
    err_total = w * _abs_dev_above(cut, _laplace_tail(cut, b, nonneg=bool((cut >= 0).all())), t, tail_t)
    err_total /= raw
    n_pub = (w * p).sum(axis=1)
    pos = n_pub > 0
    safe = np.where(pos, n_pub, 1.0)
    out["pairs_published_expected"] = n_pub
    out["relative_error"] = np.where(pos, err_total.sum(axis=1) / safe, np.nan)
    if not split:
        return out
    zero = np.zeros(b.shape)
    err_noise = w * _abs_dev_above(zero, _laplace_tail(zero, b), t, tail_t) / raw
    err_bound = w * cut * p / raw
    mostly_noise = w * _laplace_tail(np.maximum(true, t), b)[0]
    tot, alone_b, alone_n = err_total.sum(axis=1), err_bound.sum(axis=1), err_noise.sum(axis=1)
    trips_pub = (w * raw * p).sum(axis=1)
    nan = np.full(eps.shape, np.nan)
    out.update({
        "pairs_published_frac": n_pub / n_all if n_all else nan,
        "trips_published_expected": trips_pub,
        "trips_published_frac": np.where(trips_all != 0, trips_pub / np.where(trips_all != 0, trips_all, 1.0), nan),
        "relative_error_bounding": np.where(pos, shapley_split(tot, alone_b, alone_n)[0] / safe, np.nan),
        "relative_error_noise": np.where(pos, shapley_split(tot, alone_b, alone_n)[1] / safe, np.nan),
        "mostly_noise_expected": mostly_noise.sum(axis=1),
    })
    return out


def published_error(raw, true, epsilons, thresholds, sensitivity: float = 1, *, weights=None,
                    scales=None) -> tuple[np.ndarray, np.ndarray]:
    """``pairs_published_expected`` and ``relative_error`` of :func:`expected_error` at many settings in one pass
    of array arithmetic (:func:`expected_errors` without the split): setting ``i`` is ε ``epsilons[i]``, threshold
    ``thresholds[i]`` and every count times ``scales[i]`` (default 1). The same floats as :func:`expected_error`
    (a test checks them to the bit); for the designer's searches, which ask only whether a release would be
    useful. Inputs are checked by the caller (positive ε and scales, thresholds >= 1, ``true <= raw``)."""
    e = expected_errors(raw, true, epsilons, thresholds, sensitivity, weights=weights, scales=scales, split=False)
    return e["pairs_published_expected"], e["relative_error"]


def expected_error(raw, true, epsilon: float, threshold: float, sensitivity: float = 1, *, weights=None,
                   n_pairs: int | None = None, trips_total: float | None = None) -> dict:
    """What a thresholded Laplace release of these pairs publishes and how wrong it is, in expectation (no noise
    drawn), with the error split into its two causes.

    Pair j has ``raw[j]`` users before contribution bounding and ``true[j]`` after; it is published when
    ``true + Z >= τ`` with ``Z ~ Lap(0, sensitivity/ε)`` and then reads ``true + Z``. Its relative error against the
    real count is ``|true + Z − raw| / raw``; the part due to **contribution bounding** is ``(raw − true) / raw``
    (people whose trips on the pair were cut) and the part due to **noise** ``|Z| / raw``, each alone; the two parts
    reported are their Shapley split (:func:`shapley_split`), which adds up to the total. All expectations are closed forms of the Laplace law (``E[|Z − a|; Z >= t]`` from its two partial
    moments); error figures are ratios of expectations over published pairs,
    ``Σ_j E[err_j; published_j] / Σ_j P(published_j)`` — what a release's mean over published pairs averages to
    when many pairs are published (PipelineDP's utility analysis reports error per partition the same way, from the
    noise law instead of a draw).

    Parameters
    ----------
    raw, true:
        Counts per pair before and after bounding (``true <= raw``; pairs with ``true = 0`` are not in the release
        and are left out).
    epsilon, threshold, sensitivity:
        As in :class:`odcore.privacy.release.ReleaseConfig` (``sensitivity = max_pairs`` in user-level mode).
    weights:
        Optional number of pairs with each (raw, true) (grouped counts); 1 each by default.
    n_pairs, trips_total:
        Denominators of the published shares (default: the pairs given and their raw sum).

    Returns
    -------
    dict
        ``pairs_published_expected``, ``pairs_published_frac``, ``trips_published_expected`` (raw user-trips on
        published pairs), ``trips_published_frac``, ``relative_error`` (total), ``relative_error_bounding``,
        ``relative_error_noise``, ``mostly_noise_expected`` (published pairs whose noise is larger than their count:
        ``P(true + Z >= τ, |Z| > true)``). NaN where nothing is expected to be published.

    Examples
    --------
    >>> e = expected_error([1000], [1000], 1.0, 10)       # a large pair: kept for sure, error ≈ scale / count
    >>> round(e["relative_error"], 4), round(e["relative_error_noise"], 4), e["relative_error_bounding"]
    (0.001, 0.001, 0.0)
    """
    raw = np.asarray(raw, dtype=float)
    true = np.asarray(true, dtype=float)
    if raw.shape != true.shape or np.any(true > raw + 1e-9):
        raise ParameterError("expected_error needs raw and true counts of the same pairs with true <= raw.")
    eps = check_positive("epsilon", epsilon)
    tau = check_threshold(threshold)
    sens = check_positive("sensitivity", sensitivity)
    w = np.ones_like(raw) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != raw.shape:
        raise ParameterError("expected_error: weights must have one value per pair group.")
    e = expected_errors(raw, true, [eps], [tau], sens, weights=w, n_pairs=n_pairs, trips_total=trips_total)
    return {k: float(e[k][0]) for k in ("pairs_published_expected", "pairs_published_frac",
                                        "trips_published_expected", "trips_published_frac", "relative_error",
                                        "relative_error_bounding", "relative_error_noise", "mostly_noise_expected")}
