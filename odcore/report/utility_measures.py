"""Utility in the measures people who use DP mobility releases already read, for a release against the truth and
for two releases against each other.

The flow measures follow the definitions of dp-mobility-report's benchmark (Alexandra Kapp et al.,
``dp_mobility_report/benchmark/similarity_measures.py``); where a choice differs it is said next to the code and in
docs/utility_measures.md:

- **SMAPE** over the union of the pairs of both sides, a missing pair counting 0, on the *shares* of the total
  (each side divided by its sum, as dp-mobility-report does for OD flows): mean of ``|a − b| / ((|a| + |b|)/2)``,
  0 where both are 0 (range 0–2).
- **Jensen–Shannon**: the Jensen–Shannon *distance* (square root of the divergence, natural logarithm), the value
  ``scipy.spatial.distance.jensenshannon`` and dp-mobility-report give (range 0–√ln 2 ≈ 0.833).
- **KL**: ``Σ p log(p / q)`` with ``p`` the compared side and ``q`` the base (``scipy.stats.entropy(p, q)``, the
  direction dp-mobility-report uses); infinite when the compared side has a pair the base lacks.
- **Earth mover's distance** over flow lengths (km between the zone centres of origin and destination, each flow
  weighted by its count; one-dimensional Wasserstein-1) and over zones (the share of trip ends in each zone, moved
  along great-circle km between zone centres). dp-mobility-report moves rounded percentages in float32 through
  OpenCV over visits per tile; here the shares are moved exactly (a linear programme), in km.
- **Top-N coverage**: the share of the base's N largest flows that are among the compared side's N largest
  (dp-mobility-report's ``top_n_coverage``). Ties are broken by (week, origin, destination).
- **Kendall τ of the top-N flows**: τ-b between the two sides' counts over the base's N largest flows.
  dp-mobility-report correlates the two lists of pair ids in rank order instead, which is not a rank correlation of
  the flows; τ-b over the same N pairs is.
- **RMSE split into contribution-bounding bias and noise** as PipelineDP's utility analysis splits a partition's
  error (``analysis/cross_partition_combiners.py``: bias from the l0 bound, noise variance, dropped partitions
  counted with their whole value), but added in squared units so that the parts sum to the RMSE²: over every
  observed pair, error = published count − true count before bounding, and −(true count) for a pair not published.

References
----------
Kapp, A., Hansmeyer, J., Mihaljević, H. (2023). Generating a synthetic mobility report with differential privacy
    guarantees (dp-mobility-report). Proc. ACM SIGSPATIAL.
OpenMined PipelineDP, utility analysis: per-partition ``rmse = sqrt(bias² + variance)`` with
    ``rmse_with_dropped_partitions = p·rmse + (1 − p)·|value|``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.optimize import linprog
from scipy.sparse import coo_matrix, vstack

from odcore.constants import DESTINATION, NOISY_COUNT, ORIGIN, RELEASED, TRUE_COUNT, WEEK
from odcore.errors import ParameterError, check_int, check_positive
from odcore.privacy.release import RAW_COUNT

__all__ = [
    "EARTH_RADIUS_KM",
    "MAX_EMD_PAIRS",
    "TOP_N",
    "align_flows",
    "compare_flows",
    "emd_1d",
    "emd_zones",
    "expected_rmse_parts",
    "haversine_km",
    "js_distance",
    "kendall_tau_b",
    "kl_divergence",
    "release_vs_truth",
    "rmse_parts",
    "smape",
    "top_n_coverage",
    "top_n_order",
]

EARTH_RADIUS_KM = 6371.0088     # mean Earth radius (IUGG)
TOP_N = (10, 50, 100)           # dp-mobility-report's default top_n_ranking
MAX_EMD_PAIRS = 100_000         # (zone of one side, zone of the other) pairs above which the zone EMD is not computed
                                # (said so): one variable each, a few seconds at this size


# ---------------------------------------------------------------------------------------------------------------
# The measures on two aligned vectors
# ---------------------------------------------------------------------------------------------------------------

def _vec(name: str, x) -> np.ndarray:
    a = np.asarray(x, dtype=float).ravel()
    if not np.isfinite(a).all():
        raise ParameterError(f"{name} holds a value that is not a finite number.")
    return a


def _pair(a, b, names=("estimate", "true")) -> tuple[np.ndarray, np.ndarray]:
    x, y = _vec(names[0], a), _vec(names[1], b)
    if x.shape != y.shape:
        raise ParameterError(f"{names[0]} and {names[1]} must have the same length, got {x.size} and {y.size}.")
    return x, y


def _shares(name: str, x: np.ndarray) -> np.ndarray:
    if (x < 0).any():
        raise ParameterError(f"{name} has a negative value; a distribution needs counts >= 0.")
    s = x.sum()
    if s <= 0:
        raise ParameterError(f"{name} sums to 0: there is no distribution to compare.")
    return x / s


def smape(estimate, true) -> float:
    """Symmetric mean absolute percentage error: mean over entries of ``|e − t| / ((|e| + |t|)/2)``, an entry where
    both are 0 counting 0 (dp-mobility-report's ``symmetric_mape``). Range 0–2.

    >>> smape([1.0, 0.0, 3.0], [1.0, 2.0, 1.0])
    1.0
    """
    e, t = _pair(estimate, true)
    if e.size == 0:
        return float("nan")
    den = (np.abs(e) + np.abs(t)) / 2
    terms = np.divide(np.abs(e - t), den, out=np.zeros_like(den), where=den > 0)
    return float(terms.mean())


def kl_divergence(p, q) -> float:
    """``KL(p ‖ q) = Σ p_i log(p_i / q_i)`` of the two vectors normalised to sum 1 (natural logarithm); infinite when
    ``p`` has mass where ``q`` has none."""
    pp, qq = _pair(p, q, ("p", "q"))
    pp, qq = _shares("p", pp), _shares("q", qq)
    on = pp > 0
    if (qq[on] == 0).any():
        return float("inf")
    return float(np.sum(pp[on] * np.log(pp[on] / qq[on])))


def js_distance(p, q) -> float:
    """Jensen–Shannon distance: ``sqrt(½ KL(p ‖ m) + ½ KL(q ‖ m))`` with ``m = (p + q)/2``, both normalised to sum
    1, natural logarithm (the value of ``scipy.spatial.distance.jensenshannon``). 0 for equal distributions,
    ``sqrt(ln 2)`` for disjoint ones."""
    pp, qq = _pair(p, q, ("p", "q"))
    pp, qq = _shares("p", pp), _shares("q", qq)
    m = (pp + qq) / 2

    def part(x: np.ndarray) -> float:
        on = x > 0
        return float(np.sum(x[on] * np.log(x[on] / m[on])))

    return math.sqrt(max(0.5 * part(pp) + 0.5 * part(qq), 0.0))


def kendall_tau_b(x, y) -> float:
    """Kendall's τ-b: ``(C − D) / sqrt((n0 − n_x)(n0 − n_y))`` over the ``n0 = n(n−1)/2`` pairs of entries, C and D
    the concordant and discordant ones, ``n_x``/``n_y`` the pairs tied in x/y. NaN when a side is constant (or fewer
    than 2 entries). Counted pair by pair (n ≤ a few thousand)."""
    a, b = _pair(x, y, ("x", "y"))
    n = a.size
    if n < 2:
        return float("nan")
    if n > 5000:
        raise ParameterError(f"kendall_tau_b counts every pair of entries; got {n} entries (at most 5,000).")
    i, j = np.triu_indices(n, k=1)
    sx, sy = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
    untied_x, untied_y = float(np.abs(sx).sum()), float(np.abs(sy).sum())
    if untied_x == 0 or untied_y == 0:
        return float("nan")
    return float((sx * sy).sum() / math.sqrt(untied_x * untied_y))


def top_n_order(values, keys: pd.DataFrame | None = None) -> np.ndarray:
    """Indices of ``values`` from the largest down, ties by the rows of ``keys`` (ascending, column by column) or by
    position."""
    v = _vec("values", values)
    cols = [] if keys is None else [keys[c].to_numpy() for c in reversed(list(keys.columns))]
    return np.lexsort((np.arange(v.size), *cols, -v))   # the last key sorts first


def top_n_coverage(base, other, n: int, keys: pd.DataFrame | None = None) -> float:
    """Share of the ``n`` largest entries of ``base`` that are among the ``n`` largest of ``other`` (ties by
    ``keys``). Entries of ``other`` that are 0 are never among its largest (an unpublished pair is not a top flow)."""
    b, o = _pair(base, other, ("base", "other"))
    n = check_int("n", n, minimum=1)
    top_b = top_n_order(b, keys)[:n]
    top_b = top_b[b[top_b] > 0]
    if top_b.size == 0:
        return float("nan")
    top_o = top_n_order(o, keys)[:n]
    top_o = top_o[o[top_o] > 0]
    return float(np.isin(top_b, top_o).sum() / top_b.size)


def emd_1d(u_values, v_values, u_weights=None, v_weights=None) -> float:
    """Earth mover's distance (Wasserstein-1) between two weighted samples on a line: ``∫ |F_u(x) − F_v(x)| dx``
    with F the weighted empirical distribution functions."""
    u, v = _vec("u_values", u_values), _vec("v_values", v_values)
    uw = np.ones_like(u) if u_weights is None else _vec("u_weights", u_weights)
    vw = np.ones_like(v) if v_weights is None else _vec("v_weights", v_weights)
    if uw.shape != u.shape or vw.shape != v.shape:
        raise ParameterError("emd_1d: one weight per value is needed on each side.")
    uw, vw = _shares("u_weights", uw), _shares("v_weights", vw)
    xs = np.union1d(u, v)
    if xs.size < 2:
        return 0.0
    # the distribution functions at every point where one of them steps, held until the next point
    fu, fv = _cdf_at(u, uw, xs[:-1]), _cdf_at(v, vw, xs[:-1])
    return float(np.sum(np.abs(fu - fv) * np.diff(xs)))


def _cdf_at(values: np.ndarray, weights: np.ndarray, at: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    cum = np.concatenate([[0.0], np.cumsum(weights[order])])
    return cum[np.searchsorted(values[order], at, side="right")]


def haversine_km(lat1, lon1, lat2, lon2) -> np.ndarray:
    """Great-circle distance in km (haversine, mean Earth radius), element-wise or by broadcasting."""
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dlat, dlon = p2 - p1, np.radians(np.asarray(lon2) - np.asarray(lon1))
    h = np.sin(dlat / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dlon / 2) ** 2
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0)))


def emd_zones(a_lat, a_lon, a_weight, b_lat, b_lon, b_weight, *, max_pairs: int = MAX_EMD_PAIRS) -> float:
    """Earth mover's distance in km between two distributions over places (zone centres; the two sides may use
    different zones): the least mean great-circle distance over which the shares of ``a`` must move to become those
    of ``b``, solved exactly as a transport linear programme (HiGHS). Places with no mass are left out; more than
    ``max_pairs`` pairs of places with mass (one side's times the other's) raise :class:`ParameterError`."""
    aw, bw = _vec("a_weight", a_weight), _vec("b_weight", b_weight)
    ka, kb = aw > 0, bw > 0
    if int(ka.sum()) * int(kb.sum()) > max_pairs:
        raise ParameterError(f"emd_zones: {int(ka.sum())} × {int(kb.sum())} zones with mass; at most "
                             f"max_pairs={max_pairs:,} pairs of them (the programme has one variable per pair).")
    pa, pb = _shares("a_weight", aw)[ka], _shares("b_weight", bw)[kb]
    cost = haversine_km(np.asarray(a_lat, float)[ka][:, None], np.asarray(a_lon, float)[ka][:, None],
                        np.asarray(b_lat, float)[kb][None, :], np.asarray(b_lon, float)[kb][None, :])
    na, nb = pa.size, pb.size
    if na == 1 or nb == 1:   # everything moves to (or from) the one place
        return float((cost * (pa[:, None] * pb[None, :])).sum())
    # transport plan x[i, j] >= 0 with row sums pa and column sums pb (the last column constraint is implied)
    rows = np.repeat(np.arange(na), nb)
    cols = np.tile(np.arange(nb), na)
    a_row = coo_matrix((np.ones(na * nb), (rows, np.arange(na * nb))), shape=(na, na * nb))
    keep = cols < nb - 1
    a_col = coo_matrix((np.ones(int(keep.sum())), (cols[keep], np.arange(na * nb)[keep])), shape=(nb - 1, na * nb))
    res = linprog(cost.ravel(), A_eq=vstack([a_row, a_col]).tocsr(), b_eq=np.concatenate([pa, pb[:-1]]),
                  bounds=(0, None), method="highs-ds",
                  options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10})
    if res.status != 0:
        raise ParameterError(f"emd_zones: the transport programme was not solved ({res.message}).")
    return float(res.fun)


# ---------------------------------------------------------------------------------------------------------------
# Two tables of flows
# ---------------------------------------------------------------------------------------------------------------

def _keys(with_week: bool) -> list[str]:
    return [WEEK, ORIGIN, DESTINATION] if with_week else [ORIGIN, DESTINATION]


def align_flows(base: pd.DataFrame, other: pd.DataFrame, *, base_value: str, other_value: str
                ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The union of the pairs of both tables (by week, origin, destination when both have a week, else by origin and
    destination) in key order, and each side's value on them (0 where a side lacks the pair). A repeated key in a
    table raises :class:`ParameterError`."""
    for name, df, col in (("base", base, base_value), ("other", other, other_value)):
        miss = [c for c in (ORIGIN, DESTINATION, col) if c not in df.columns]
        if miss:
            raise ParameterError(f"{name} flows miss column(s) {miss}; got {list(df.columns)}.")
    keys = _keys(WEEK in base.columns and WEEK in other.columns)
    for name, df in (("base", base), ("other", other)):
        if df.duplicated(keys).any():
            raise ParameterError(f"{name} flows repeat a ({', '.join(keys)}) key; one row per pair is needed.")
    a = base[[*keys, base_value]].rename(columns={base_value: "_a"})
    b = other[[*keys, other_value]].rename(columns={other_value: "_b"})
    m = a.merge(b, on=keys, how="outer", sort=True)
    for c in keys:
        m[c] = m[c].astype(np.int64)
    return (m[keys].reset_index(drop=True), m["_a"].fillna(0.0).to_numpy(float),
            m["_b"].fillna(0.0).to_numpy(float))


def _centres(df: pd.DataFrame, centroids: pd.DataFrame | None) -> tuple[np.ndarray, ...] | None:
    """Origin and destination centres of each row: the table's own ``origin_lat`` ... columns (a published table) or
    looked up in ``centroids`` (cell, lat, lon)."""
    cols = ("origin_lat", "origin_lon", "destination_lat", "destination_lon")
    if all(c in df.columns for c in cols):
        return tuple(df[c].to_numpy(float) for c in cols)
    if centroids is None:
        return None
    c = centroids.set_index("cell")
    o, d = df[ORIGIN].to_numpy(np.int64), df[DESTINATION].to_numpy(np.int64)
    if not (np.isin(o, c.index.to_numpy()).all() and np.isin(d, c.index.to_numpy()).all()):
        raise ParameterError("flows name a zone that the centroids table lacks.")
    return (c["lat"].reindex(o).to_numpy(float), c["lon"].reindex(o).to_numpy(float),
            c["lat"].reindex(d).to_numpy(float), c["lon"].reindex(d).to_numpy(float))


def _zone_mass(df: pd.DataFrame, value: str, cen: tuple[np.ndarray, ...]) -> pd.DataFrame:
    """Trip ends per zone centre: each flow adds its count at its origin and at its destination."""
    v = df[value].to_numpy(float)
    lat = np.concatenate([cen[0], cen[2]])
    lon = np.concatenate([cen[1], cen[3]])
    return (pd.DataFrame({"lat": lat, "lon": lon, "w": np.concatenate([v, v])})
            .groupby(["lat", "lon"], sort=True, as_index=False)["w"].sum())


def compare_flows(base: pd.DataFrame, other: pd.DataFrame, *, base_value: str = NOISY_COUNT,
                  other_value: str = NOISY_COUNT, centroids_base: pd.DataFrame | None = None,
                  centroids_other: pd.DataFrame | None = None, top_n=TOP_N, same_zones: bool = True,
                  max_emd_pairs: int = MAX_EMD_PAIRS) -> dict:
    """Every measure of ``other`` against ``base`` (a release against the truth, or two releases).

    Parameters
    ----------
    base, other:
        One row per pair: origin, destination (and week, used as a key when both have it) and the value column.
        Rows whose value is not positive are left out (a pair with no trip, or a noisy count not published).
    base_value, other_value:
        The count columns.
    centroids_base, centroids_other:
        ``cell, lat, lon`` of each side's zones, for the distance measures (a published table's own
        ``origin_lat`` ... columns are used when present). Without them the distance measures are None.
    top_n:
        The N of the coverage and of Kendall's τ.
    same_zones:
        Whether pair ids mean the same place on both sides (False for squares against hexagons: then only the
        distance measures are computed, since no pair of one side is a pair of the other).

    Returns
    -------
    dict
        ``pairs_base``, ``pairs_other``, ``pairs_union``, ``trips_base``, ``trips_other`` (sums of the values);
        ``smape``, ``jsd`` (Jensen–Shannon distance), ``kl``, ``top_n`` (N → ``coverage``, ``kendall_tau``) on
        the shares of the union of pairs; ``emd_length_km`` (flow lengths), ``emd_zones_km`` (trip ends over zones,
        or None with ``emd_zones_note``), ``mean_length_km_base`` / ``_other``.
    """
    for name, df, col in (("base", base, base_value), ("other", other, other_value)):
        miss = [c for c in (ORIGIN, DESTINATION, col) if c not in df.columns]
        if miss:
            raise ParameterError(f"{name} flows miss column(s) {miss}; got {list(df.columns)}.")
    b = base.loc[base[base_value].to_numpy(float) > 0]
    o = other.loc[other[other_value].to_numpy(float) > 0]
    if not len(b):
        raise ParameterError("the base flows have no pair with a positive count: nothing to compare with.")
    out: dict = {"pairs_base": len(b), "pairs_other": len(o), "trips_base": float(b[base_value].sum()),
                 "trips_other": float(o[other_value].sum())}
    ns = [check_int("top_n", n, minimum=1) for n in np.atleast_1d(top_n)]
    if same_zones:
        keys, va, vb = align_flows(b, o, base_value=base_value, other_value=other_value)
        out["pairs_union"] = len(keys)
        if len(o):
            pa, pb = va / va.sum(), vb / vb.sum()
            out.update({"smape": smape(pb, pa), "jsd": js_distance(pb, pa), "kl": kl_divergence(pb, pa)})
        else:
            out.update({"smape": 2.0, "jsd": math.sqrt(math.log(2)), "kl": float("inf")})
        out["top_n"] = {}
        for n in ns:
            top = top_n_order(va, keys)[:n]
            out["top_n"][n] = {"coverage": top_n_coverage(va, vb, n, keys),
                               "kendall_tau": kendall_tau_b(va[top], vb[top])}
    cb, co = _centres(b, centroids_base), _centres(o, centroids_other if not same_zones or centroids_other
                                                     is not None else centroids_base)
    out.update({"emd_length_km": None, "emd_zones_km": None, "mean_length_km_base": None,
                "mean_length_km_other": None})
    if cb is not None and co is not None and len(o):
        lb, lo = haversine_km(*cb), haversine_km(*co)
        wb, wo = b[base_value].to_numpy(float), o[other_value].to_numpy(float)
        out.update({"emd_length_km": emd_1d(lb, lo, wb, wo),
                    "mean_length_km_base": float(np.average(lb, weights=wb)),
                    "mean_length_km_other": float(np.average(lo, weights=wo))})
        zb, zo = _zone_mass(b, base_value, cb), _zone_mass(o, other_value, co)
        try:
            out["emd_zones_km"] = emd_zones(zb["lat"], zb["lon"], zb["w"], zo["lat"], zo["lon"], zo["w"],
                                            max_pairs=max_emd_pairs)
        except ParameterError as exc:
            out["emd_zones_note"] = str(exc)
    return out


# ---------------------------------------------------------------------------------------------------------------
# A release against the truth (DO NOT SHARE: everything here reads true counts)
# ---------------------------------------------------------------------------------------------------------------

def _release_arrays(table: pd.DataFrame):
    need = (TRUE_COUNT, NOISY_COUNT, RELEASED)
    miss = [c for c in need if c not in table.columns]
    if miss:
        raise ParameterError(f"released table misses column(s) {miss}; expected the output of "
                             f"odcore.privacy.release.release().")
    true = table[TRUE_COUNT].to_numpy(float)
    raw = table[RAW_COUNT].to_numpy(float) if RAW_COUNT in table.columns else true
    noisy = table[NOISY_COUNT].to_numpy(float)
    rel = table[RELEASED].to_numpy(bool)
    return raw, true, noisy, rel


def rmse_parts(table: pd.DataFrame) -> dict:
    """The observed RMSE of one release over every observed pair and its parts, which add up to it in squared units.

    Error of a pair: published count − true count before bounding (``raw_count``) when published, − true count
    when not (a dropped pair reads as 0). With ``c`` = people cut by bounding (``true_count − raw_count``, <= 0) and
    ``z`` the noise, a published pair's error² is ``c² + 2cz + z²``:

    - ``bounding``: mean of ``c²`` over published pairs (per all observed pairs): PipelineDP's contribution-
      bounding bias;
    - ``noise``: mean of ``z²`` (as published: the threshold keeps the pairs whose noise pushed them over);
    - ``cross``: mean of ``2cz`` (the bias and the noise of a pair pushing the same way or not);
    - ``dropped``: mean of ``raw²`` over pairs not published (PipelineDP counts dropped partitions with their
      whole value).

    Returns the four parts (mean squared errors), ``mse`` (their sum), ``rmse`` = √mse, and ``pairs``.
    """
    raw, true, noisy, rel = _release_arrays(table)
    n = raw.size
    if n == 0:
        raise ParameterError("released table is empty: no pair to measure the error on.")
    c = true - raw
    z = noisy - true
    parts = {"bounding": float(np.sum(c[rel] ** 2) / n), "noise": float(np.sum(z[rel] ** 2) / n),
             "cross": float(np.sum(2 * c[rel] * z[rel]) / n), "dropped": float(np.sum(raw[~rel] ** 2) / n)}
    mse = sum(parts.values())
    return {**parts, "mse": mse, "rmse": math.sqrt(mse), "pairs": n}


def expected_rmse_parts(raw, true, epsilon: float, threshold: float, sensitivity: float = 1) -> dict:
    """The expected parts of :func:`rmse_parts` over the Laplace noise, given the bounding (``true`` <= ``raw``):
    exact closed forms for ``Z ~ Laplace(0, b)``, ``b = sensitivity/ε``, published iff ``true + Z >= τ``; a pair
    whose bounded count is 0 is not submitted (never published).

    With ``t = τ − true`` and ``s = |t|``: ``P(Z >= t)`` is ``½e^{−s/b}`` (t >= 0) or ``1 − ½e^{−s/b}``;
    ``E[Z; Z >= t] = ½(s + b)e^{−s/b}``; ``E[Z²; Z >= t]`` is ``½e^{−s/b}(s² + 2bs + 2b²)`` (t >= 0) or ``2b²`` minus
    that. Parts per pair: bounding ``p·c²``, noise ``E[Z²; Z >= t]``, cross ``2c·E[Z; Z >= t]``, dropped
    ``(1 − p)·raw²``; each averaged over the pairs.
    """
    r, t_c = _pair(raw, true, ("raw", "true"))
    if r.size == 0:
        raise ParameterError("expected_rmse_parts: no pair.")
    if (t_c > r).any() or (t_c < 0).any():
        raise ParameterError("expected_rmse_parts needs 0 <= true <= raw for every pair.")
    b = check_positive("sensitivity", sensitivity) / check_positive("epsilon", epsilon)
    tau = check_positive("threshold", threshold)
    live = t_c > 0
    t = tau - t_c
    s = np.abs(t)
    e = np.exp(-s / b)
    p = np.where(t >= 0, 0.5 * e, 1 - 0.5 * e) * live
    m1 = 0.5 * (s + b) * e * live
    tail2 = 0.5 * e * (s * s + 2 * b * s + 2 * b * b)
    m2 = np.where(t >= 0, tail2, 2 * b * b - tail2) * live
    c = t_c - r
    n = r.size
    parts = {"bounding": float(np.sum(p * c * c) / n), "noise": float(np.sum(m2) / n),
             "cross": float(np.sum(2 * c * m1) / n), "dropped": float(np.sum((1 - p) * r * r) / n)}
    mse = sum(parts.values())
    return {**parts, "mse": mse, "rmse": math.sqrt(mse), "pairs": n, "pairs_published_expected": float(p.sum())}


def release_vs_truth(table: pd.DataFrame, centroids: pd.DataFrame | None = None, *, top_n=TOP_N,
                     epsilon: float | None = None, threshold: float | None = None, sensitivity: float = 1,
                     max_emd_pairs: int = MAX_EMD_PAIRS) -> dict:
    """Every measure of a release against the truth (DO NOT SHARE: it reads the true counts).

    The truth is the true count before bounding (``raw_count``) of every observed pair; the release is the noisy
    count of the published pairs (0 elsewhere). Returns :func:`compare_flows`'s measures, the shares of pairs and
    trips published (``pairs_published_frac``, ``trips_published_frac``: user-pair contributions on published
    pairs), :func:`rmse_parts` under ``rmse`` and, with ``epsilon`` and ``threshold``, its expectation
    (:func:`expected_rmse_parts`) under ``rmse_expected``.
    """
    raw, true, noisy, rel = _release_arrays(table)
    keep = [c for c in (WEEK, ORIGIN, DESTINATION) if c in table.columns]
    truth = table[keep].copy()
    truth["count"] = raw
    pub = table.loc[rel, keep].copy()
    pub["count"] = noisy[rel]
    out = compare_flows(truth, pub, base_value="count", other_value="count", centroids_base=centroids,
                        centroids_other=centroids, top_n=top_n, max_emd_pairs=max_emd_pairs)
    n = raw.size
    out.update({
        "pairs_total": n, "pairs_published": int(rel.sum()),
        "pairs_published_frac": float(rel.sum() / n) if n else float("nan"),
        "trips_total": float(raw.sum()), "trips_published": float(raw[rel].sum()),
        "trips_published_frac": float(raw[rel].sum() / raw.sum()) if raw.sum() else float("nan"),
        "rmse": rmse_parts(table),
    })
    if epsilon is not None and threshold is not None:
        out["rmse_expected"] = expected_rmse_parts(raw, true, epsilon, threshold, sensitivity)
    return out
