"""The prepared week, the contribution-bounding ranks, the keyed hash and the partition-selection table against plain
formulations of the same rules, kept here as the reference: a lexsort of the rows, the ``%`` form of the hash (the
form the SQL engines run), pandas group-bys and ``scipy.stats.norm``. Bitwise the same arrays and frames on the
bundled city at three grids and several seeds, and on inputs that take the general paths (string ids, duplicates,
several weeks, ids too wide to pack, a user-week too large for one sort of packed values)."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pandas as pd
import pytest

from odcore.od import bounding
from odcore.od.pairs import (
    _user_weeks,
    _validate_pairs,
    bound_contributions,
    bound_ranks,
    bounded_counts,
    prepare_pairs,
)
from odcore.paths import REPO_ROOT
from odcore.privacy.release import release_probability
from odcore.privacy.selection import (
    Strategy,
    compare_selection,
    keep_probability,
    truncated_geometric_keep,
)

SAMPLE = REPO_ROOT / "sample_data" / "synthetic_city.parquet"
GRIDS = (1.3, 0.8, 2.1)     # km²: the default, a finer and a coarser grid


@pytest.fixture(scope="module")
def city():
    """The bundled city's busiest week at each of GRIDS: DataFrame[week, user, origin, destination]."""
    from odcore.data.traces import load_traces
    from odcore.od.trips import ODConfig, build_od

    if not SAMPLE.is_file():
        pytest.skip("bundled sample missing (make sample-data)")
    df = load_traces(SAMPLE).df
    out = {}
    for km in GRIDS:
        od = build_od(df, ODConfig(cell_km2=km))
        out[km] = od.week_pairs(od.busiest_week()[0])
    return out


# ---- the reference: plain and slow ---------------------------------------------------------------------------------

def plain_user_hashes(users) -> np.ndarray:
    return np.array([int(hashlib.md5(str(x).encode("utf-8")).hexdigest()[:8], 16) for x in users], dtype=np.int64)


def plain_hash(key, u, week, origin, destination) -> np.ndarray:
    """odcore.od.bounding's rule with ``%`` at every step."""
    p = np.int64(bounding.HASH_PRIME)
    h = np.asarray(u, dtype=np.int64).copy()
    for (a, b), x in zip(bounding.round_constants(key), (h, week, origin, destination, np.zeros(len(h), np.int64)),
                         strict=True):
        h = ((h + np.mod(np.asarray(x, dtype=np.int64), p)) % p * np.int64(a) + np.int64(b)) % p
        h = h * h % p
    return h


def plain_prepared(pairs: pd.DataFrame):
    """(w, o, d, u, users, n_dup): user codes into the sorted labels, duplicates dropped, rows lexsorted by
    (week, origin, destination, user)."""
    codes, users = pd.factorize(pairs["user"], sort=True)
    t = pd.DataFrame({"w": pairs["week"].to_numpy(np.int64), "o": pairs["origin"].to_numpy(np.int64),
                      "d": pairs["destination"].to_numpy(np.int64), "u": codes.astype(np.int64)})
    n0 = len(t)
    t = t.drop_duplicates()
    w, o, d, u = (t[c].to_numpy() for c in "wodu")
    order = np.lexsort((u, d, o, w))
    return w[order], o[order], d[order], u[order], np.asarray(users), n0 - len(t)


def plain_ranks(w, o, d, u, users, key):
    """Each row's rank by (hash, origin, destination) within its (week, user), and the groups' sizes in (week, user)
    order."""
    h = plain_hash(key, plain_user_hashes(users)[u], w, o, d)
    order = np.lexsort((d, o, h, u, w))
    ws, us = w[order], u[order]
    new = np.ones(len(w), dtype=bool)
    new[1:] = (ws[1:] != ws[:-1]) | (us[1:] != us[:-1])
    starts = np.flatnonzero(new)
    rank = np.empty(len(w), dtype=np.int64)
    rank[order] = np.arange(len(w)) - starts[np.cumsum(new) - 1]
    return rank, np.diff(np.append(starts, len(w)))


def plain_gaussian_delta(sigma, epsilon, l2=1.0):
    from scipy.stats import norm

    a, b = l2 / (2 * sigma), epsilon * sigma / l2
    return float(norm.cdf(a - b) - math.exp(epsilon) * norm.cdf(-a - b))


def plain_gaussian_one_count(epsilon, delta, m):
    from scipy import optimize
    from scipy.stats import norm

    d, l2 = delta / 2, math.sqrt(m)
    hi = 1.0
    while plain_gaussian_delta(hi, epsilon, l2) > d:
        hi *= 2
    sigma = float(optimize.brentq(lambda s: plain_gaussian_delta(s, epsilon, l2) - d, 1e-9, hi, xtol=1e-12,
                                  rtol=1e-12))
    d1 = -math.expm1(math.log1p(-delta / 2) / m)
    return sigma, 1.0 + sigma * float(norm.isf(d1))


def plain_keep(s, n, eps, delta, m, share=0.5):
    from scipy.stats import norm

    from odcore.privacy.accounting import partition_threshold

    n = np.asarray(n, dtype=float)
    if s is Strategy.LAB_ONE_COUNT:
        return release_probability(n, eps, partition_threshold(eps, m, delta), m)
    if s is Strategy.LAB_GAUSSIAN_ONE_COUNT:
        sigma, tau = plain_gaussian_one_count(eps, delta, m)
        return norm.sf((tau - n) / sigma)
    es = eps * share
    if s is Strategy.TRUNCATED_GEOMETRIC:
        return truncated_geometric_keep(n.astype(np.int64), es, delta, m)
    return release_probability(n, es, partition_threshold(es, m, delta), m)


def plain_row(name, reason, counts, keep, noisy, pub, eps_sel, eps_count):
    raw = counts["raw_count"].to_numpy(float)
    n = counts["count"].to_numpy(float)
    row = {"strategy": name, "epsilon_selection": eps_sel, "epsilon_count": eps_count,
           "pairs_expected": float(keep.sum()), "user_trips_expected": float((keep * raw).sum()),
           "pairs_published": int(pub.sum()), "user_trips_published": int(raw[pub].sum())}
    if pub.any():
        row["mre_total"] = float(np.mean(np.abs(noisy[pub] - raw[pub]) / raw[pub]))
        row["mre_bounding"] = float(np.mean((raw[pub] - n[pub]) / raw[pub]))
        row["mre_noise"] = float(np.mean(np.abs(noisy[pub] - n[pub]) / raw[pub]))
    else:
        row.update(mre_total=math.nan, mre_bounding=math.nan, mre_noise=math.nan)
    row["why"] = reason
    return row


def plain_selection(pairs, epsilon, delta, m, week, seed, share=0.5) -> pd.DataFrame:
    """compare_selection without PipelineDP as it was written with pandas: drop_duplicates, the kept rows, two
    group-bys, scipy.stats.norm."""
    from odcore.privacy.accounting import partition_threshold

    rng = np.random.default_rng(seed)
    wk = pairs.loc[pairs["week"].to_numpy() == week, ["week", "user", "origin", "destination"]].drop_duplicates()
    key = bounding.bounding_key(rng)
    w, o, d, u, users, _ = plain_prepared(wk)
    rank, _ = plain_ranks(w, o, d, u, users, key)
    kept = rank < m
    bounded = pd.DataFrame({"week": w[kept], "user": users[u[kept]], "origin": o[kept], "destination": d[kept]})
    keys = ["week", "origin", "destination"]
    raw = wk.groupby(keys, sort=True).size().rename("raw_count")
    cnt = bounded.groupby(keys, sort=True).size().rename("count")
    counts = pd.concat([raw, cnt], axis=1).fillna(0).astype(np.int64).reset_index()
    n = counts["count"].to_numpy(float)
    live = n > 0
    rows = []
    tau = partition_threshold(epsilon, m, delta)
    noisy = n + rng.laplace(0.0, m / epsilon, size=n.size)
    pub = live & (noisy >= tau)
    keep = np.where(live, plain_keep(Strategy.LAB_ONE_COUNT, n, epsilon, delta, m), 0.0)
    rows.append(plain_row(str(Strategy.LAB_ONE_COUNT), f"all of epsilon on one count; tau = {tau:.1f} fitted to delta "
                          "(Google's Laplace thresholding with the same noisy count published)",
                          counts, keep, noisy, pub, epsilon, "same count"))
    sigma, tau_g = plain_gaussian_one_count(epsilon, delta, m)
    noisy = n + rng.normal(0.0, sigma, size=n.size)
    pub = live & (noisy >= tau_g)
    keep = np.where(live, plain_keep(Strategy.LAB_GAUSSIAN_ONE_COUNT, n, epsilon, delta, m), 0.0)
    rows.append(plain_row(str(Strategy.LAB_GAUSSIAN_ONE_COUNT),
                          f"Gaussian noise sigma = {sigma:.1f} on one count (L2 sensitivity sqrt(m) grows slower than "
                          f"Laplace's m), delta split evenly between the noise and tau = {tau_g:.1f}",
                          counts, keep, noisy, pub, epsilon, "same count"))
    es, ec = epsilon * share, epsilon * (1 - share)
    for s in (Strategy.TRUNCATED_GEOMETRIC, Strategy.LAPLACE_THRESHOLDING):
        keep = np.where(live, plain_keep(s, n, epsilon, delta, m, share), 0.0)
        sel = live & (rng.random(n.size) < keep)
        noisy = n + rng.laplace(0.0, m / ec, size=n.size)
        why = (f"selection gets {share:.0%} of epsilon ({es:g}) and all of delta, the count the rest "
               f"({ec:g}): the threshold moves up by the factor {1 / share:g} in noise scale")
        if s is Strategy.TRUNCATED_GEOMETRIC:
            why += "; optimal for the selection alone (Desfontaines et al.), so it keeps more than Laplace here"
        rows.append(plain_row(str(s), why, counts, keep, noisy, sel, es, ec))
    out = pd.DataFrame(rows)
    out.attrs.update({"week": week, "epsilon": epsilon, "delta": delta, "max_pairs": m,
                      "people": int(wk["user"].nunique()), "user_pairs": len(wk), "pairs": int(live.sum())})
    return out


def assert_prepared(p, pairs):
    w, o, d, u, users, n_dup = plain_prepared(pairs)
    for got, want in zip((p.w, p.o, p.d, p.u, p.users), (w, o, d, u, users), strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    assert p.n_dup == n_dup


def assert_ranks(p, key, weeks=None):
    rank, sizes = bound_ranks(p, key, weeks)
    want_rank, want_sizes = plain_ranks(p.w, p.o, p.d, p.u, p.users, key)
    np.testing.assert_array_equal(rank, want_rank)
    np.testing.assert_array_equal(sizes, want_sizes)
    assert rank.dtype == sizes.dtype == np.int64


# ---- the bundled city ------------------------------------------------------------------------------------------------

def test_city_weeks_prepare_and_rank_as_the_plain_sort(city):
    """At each grid: the prepared rows and counts are the lexsorted, deduplicated rows and their group-by sizes; the
    ranks of several keys (the same for the prepared week's memo) are the lexsort of the plain hash."""
    for km, pairs in city.items():
        prep = prepare_pairs(pairs)
        assert_prepared(prep.pairs, pairs)
        w, o, d, raw, pair_of_row = prep.counts
        g = pairs.groupby(["week", "origin", "destination"], sort=True).size()
        np.testing.assert_array_equal(raw, g.to_numpy())
        np.testing.assert_array_equal(np.c_[w, o, d], np.array(g.index.tolist()))
        np.testing.assert_array_equal(raw[pair_of_row].sum(), (raw**2).sum())
        for key in (2**62 - 1, int(np.random.default_rng(int(km * 10)).integers(0, 2**62))):
            rank, sizes = prep.bound_ranks(key)
            want_rank, want_sizes = plain_ranks(prep.pairs.w, prep.pairs.o, prep.pairs.d, prep.pairs.u,
                                                prep.pairs.users, key)
            np.testing.assert_array_equal(rank, want_rank)
            np.testing.assert_array_equal(sizes, want_sizes)
            np.testing.assert_array_equal(bound_ranks(prep.pairs, key)[0], want_rank)   # no memo, no layout


@pytest.mark.parametrize("km", GRIDS)
def test_city_selection_table_is_the_pandas_one(city, km):
    """compare_selection on the week's pairs and on the week prepared once: the frame (and its attrs) of the pandas
    formulation, at several seeds, ε and max pairs."""
    pairs = city[km]
    week = int(pairs["week"].iloc[0])
    prep = prepare_pairs(pairs)
    for seed, eps, m in ((1, 1.0, 10), (7, 0.5, 3), (123, 2.0, 1)):
        want = plain_selection(pairs, eps, 1e-6, m, week, seed)
        for got in (compare_selection(pairs, epsilon=eps, max_pairs=m, week=week, rng=seed, pipeline_dp=False),
                    compare_selection(prep, epsilon=eps, max_pairs=m, week=week, rng=seed, pipeline_dp=False),
                    compare_selection(prep, epsilon=eps, max_pairs=m, rng=seed, pipeline_dp=False)):
            pd.testing.assert_frame_equal(got, want)
            assert got.attrs == want.attrs


def test_city_bounded_rows_and_counts_are_the_plain_ones(city):
    """bound_contributions (the Attack pages' rows) and bounded_counts (the memory engine) from the prepared week:
    the rows of plain rank < m."""
    pairs = city[GRIDS[0]]
    prep = prepare_pairs(pairs)
    w, o, d, u, users, _ = plain_prepared(pairs)
    for seed, m in ((3, 2), (4, 10)):
        key = bounding.bounding_key(np.random.default_rng(seed))
        rank, _ = plain_ranks(w, o, d, u, users, key)
        kept, _ = bound_contributions(prep, m, rng=seed)
        k = rank < m
        want = pd.DataFrame({"week": w[k], "user": users[u[k]], "origin": o[k], "destination": d[k]})
        pd.testing.assert_frame_equal(kept, want)
        table, _ = bounded_counts(prep, m, key)
        np.testing.assert_array_equal(table["true_count"].to_numpy(),
                                      want.groupby(["week", "origin", "destination"]).size().reindex(
                                          pd.MultiIndex.from_frame(table[["week", "origin", "destination"]]),
                                          fill_value=0).to_numpy())


def test_keep_probability_of_integer_counts_is_the_norm_formulas():
    """Integer counts (each distinct value computed once) and the ndtr forms give scipy.stats.norm's floats."""
    n = np.random.default_rng(0).integers(0, 3000, 20_000)
    for s in Strategy:
        for eps, m in ((1.0, 10), (0.3, 1), (4.0, 25)):
            want = plain_keep(s, n, eps, 1e-6, m)
            np.testing.assert_array_equal(keep_probability(s, n, eps, 1e-6, m), want)
            np.testing.assert_array_equal(keep_probability(s, n.astype(float), eps, 1e-6, m), want)


# ---- the general paths ------------------------------------------------------------------------------------------------

def _pairs(rng, n, weeks, users, cells, user_kind="int"):
    u = rng.integers(0, users, n)
    t = pd.DataFrame({"week": rng.integers(0, weeks, n),
                      "user": u.astype(str) if user_kind == "str" else u.astype(user_kind),
                      "origin": rng.integers(0, cells, n), "destination": rng.integers(0, cells, n)})
    return pd.concat([t, t.iloc[: n // 50]]).sample(frac=1.0, random_state=int(rng.integers(0, 1000)))


@pytest.mark.parametrize("user_kind", ["str", "int", "int32", "uint16"])
def test_shuffled_weeks_with_duplicates_prepare_and_rank_as_the_plain_sort(user_kind):
    rng = np.random.default_rng(len(user_kind))
    pairs = _pairs(rng, 30_000, 4, 2000, 60, "int" if user_kind == "int" else user_kind)
    for frame in (pairs, pairs.sort_values(["week", "user"], kind="stable")):   # shuffled, and an ODData's order
        p = _validate_pairs(frame)
        assert_prepared(p, frame)
        for key in (5, 2**61 + 3):
            assert_ranks(p, key)
            assert_ranks(p, key, _user_weeks(p))


def test_ids_too_wide_to_pack_take_the_argsort():
    """Cell ids and weeks whose ranges need more than 63 bits together: the columns are sorted by an argsort and
    gathered; the same rows."""
    rng = np.random.default_rng(2)
    n = 5000
    pairs = pd.DataFrame({"week": rng.integers(-3, 40, n), "user": rng.integers(0, 300, n),
                          "origin": rng.integers(-2**40, 2**40, n), "destination": rng.integers(0, 2**40, n)})
    pairs = pd.concat([pairs, pairs.iloc[:40]])
    p = _validate_pairs(pairs)
    assert_prepared(p, pairs)
    assert_ranks(p, 99)


def test_a_user_week_too_large_for_one_packed_sort_ranks_the_same():
    """2^16 user-weeks and one of 2^17 rows: group, hash and place take more than 63 bits, so the ranks come from a
    stable sort of group · P + hash; the same ranks."""
    rng = np.random.default_rng(3)
    big = 1 << 17
    small = 1 << 16
    pairs = pd.DataFrame({"week": np.zeros(big + small, np.int64),
                          "user": np.r_[np.zeros(big, np.int64), np.arange(1, small + 1)],
                          "origin": np.r_[np.arange(big) // 512, rng.integers(0, 256, small)],
                          "destination": np.r_[np.arange(big) % 512, rng.integers(0, 256, small)]})
    p = _validate_pairs(pairs)
    assert_ranks(p, 17)


def test_selection_from_a_prepared_table_of_several_weeks():
    """A prepared table of several weeks: the default week (the one with most rows) and any other week give the
    DataFrame's table; a week without rows is refused."""
    from odcore.errors import ParameterError

    rng = np.random.default_rng(4)
    pairs = _pairs(rng, 20_000, 3, 1500, 40)
    prep = prepare_pairs(pairs)
    for week in (None, 0, 2):
        a = compare_selection(pairs, max_pairs=4, week=week, rng=5, pipeline_dp=False)
        b = compare_selection(prep, max_pairs=4, week=week, rng=5, pipeline_dp=False)
        pd.testing.assert_frame_equal(a, b)
        assert a.attrs == b.attrs
        if week is not None:
            pd.testing.assert_frame_equal(a, plain_selection(pairs, 1.0, 1e-6, 4, week, 5))
    with pytest.raises(ParameterError, match="week=9 has no pairs"):
        compare_selection(prep, week=9, rng=1, pipeline_dp=False)


def test_user_hashes_of_integer_ids_are_the_md5_of_their_text():
    """Integer ids of any width (their hashes kept by id across calls, as a grid press sees the same people) hash as
    the text of each id; other labels one by one."""
    rng = np.random.default_rng(6)
    for dtype in (np.int64, np.int32, np.int16, np.uint32, np.uint8, np.uint64):
        info = np.iinfo(dtype)
        ids = rng.integers(max(info.min, -10**6), min(info.max, 10**6), 3000, endpoint=True).astype(dtype)
        ids[:2] = [info.min, info.max]
        for part in (ids[:1000], ids, ids[::-1]):   # unseen ids, some seen, all seen
            np.testing.assert_array_equal(bounding.user_hashes(part), plain_user_hashes(part))
    labels = np.array(["a", "b", 1, 1.0], dtype=object)
    np.testing.assert_array_equal(bounding.user_hashes(labels), plain_user_hashes(labels))
    assert len(bounding.user_hashes(np.zeros(0, np.int64))) == 0
