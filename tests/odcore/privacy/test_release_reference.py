"""The prepared week, the contribution-bounding ranks and the keyed hash against plain formulations of their rules (a
lexsort of the rows, the ``%`` form of the hash that the SQL engines run, pandas group-bys): bitwise the same arrays
on the bundled city at three grids and several seeds, and on inputs that take the general paths (string ids,
duplicates, several weeks, ids too wide to pack, a user-week too large for one sort of packed values).

The partition-selection table against each strategy's definition: Google's Laplace thresholding found by bisection
on the chance that a lone person's pairs appear, the analytic Gaussian mechanism (Balle and Wang 2018) with
``scipy.stats.norm``, the truncated geometric selection by the DP constraints it must meet and be tight on
(Desfontaines et al. 2022), expected counts summed over the plain bounded counts, and the published counts against
those expectations over many seeds."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pandas as pd
import pytest
from scipy import optimize
from scipy.stats import laplace, norm

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


def paper_one_count_threshold(epsilon, delta, m):
    """Google's Laplace thresholding, by bisection on its definition: the smallest τ at which a person who alone makes
    each of their m pairs (count 1, noise Lap(m/ε)) has at most a chance δ that any of them is published:
    1 − (1 − P(1 + Lap(m/ε) >= τ))^m <= δ; at least 1."""
    b = m / epsilon

    def leak(tau):
        return 1 - (1 - laplace.sf(tau, loc=1, scale=b)) ** m

    if leak(1.0) <= delta:
        return 1.0
    lo, hi = 1.0, 2.0
    while leak(hi) > delta:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if leak(mid) <= delta else (mid, hi)
    return hi


def paper_gaussian_delta(sigma, epsilon, l2):
    """δ(ε) of the Gaussian mechanism (Balle and Wang 2018, Theorem 8), with scipy.stats.norm."""
    a, b = l2 / (2 * sigma), epsilon * sigma / l2
    return float(norm.cdf(a - b) - math.exp(epsilon) * norm.cdf(-a - b))


def paper_gaussian_one_count(epsilon, delta, m):
    """σ for (ε, δ/2) at L2 sensitivity sqrt(m), and τ such that each of a lone person's m pairs is published with
    chance 1 − (1 − δ/2)^(1/m) (so all m together: δ/2)."""
    l2 = math.sqrt(m)
    hi = 1.0
    while paper_gaussian_delta(hi, epsilon, l2) > delta / 2:
        hi *= 2
    sigma = optimize.brentq(lambda x: paper_gaussian_delta(x, epsilon, l2) - delta / 2, 1e-9, hi, xtol=1e-13,
                            rtol=1e-13)
    per_pair = 1 - (1 - delta / 2) ** (1 / m)
    return sigma, float(norm.isf(per_pair, loc=1, scale=sigma))


def paper_keep(s, n, eps, delta, m, share=0.5):
    """Chance that a pair with n people (after bounding) is published, from each strategy's definition."""
    n = np.asarray(n, dtype=float)
    if s is Strategy.LAB_ONE_COUNT:
        return laplace.sf(paper_one_count_threshold(eps, delta, m), loc=n, scale=m / eps)
    if s is Strategy.LAB_GAUSSIAN_ONE_COUNT:
        sigma, tau = paper_gaussian_one_count(eps, delta, m)
        return norm.sf(tau, loc=n, scale=sigma)
    es = eps * share
    if s is Strategy.LAPLACE_THRESHOLDING:
        return laplace.sf(paper_one_count_threshold(es, delta, m), loc=n, scale=m / es)
    raise AssertionError(s)   # the truncated geometric: checked by its constraints below


_PLAIN_WEEKS: dict = {}


def plain_week(pairs, week):
    """:func:`plain_prepared` of the week's distinct rows, kept for the next seed of the same frame and week (the
    entry holds the frame, so its ``id`` is not reused while it is kept; the last 3 kept)."""
    hit = _PLAIN_WEEKS.get((id(pairs), week))
    if hit is None or hit[0] is not pairs:
        wk = pairs.loc[pairs["week"].to_numpy() == week, ["week", "user", "origin", "destination"]].drop_duplicates()
        while len(_PLAIN_WEEKS) >= 3:
            _PLAIN_WEEKS.pop(next(iter(_PLAIN_WEEKS)))
        hit = _PLAIN_WEEKS[(id(pairs), week)] = (pairs, plain_prepared(wk))
    return hit[1]


def plain_counts(pairs, week, m, seed):
    """Distinct people per pair of the week before and after bounding by the plain ranks: (raw, bounded) arrays."""
    key = bounding.bounding_key(np.random.default_rng(seed))
    w, o, d, u, users, _ = plain_week(pairs, week)
    rank, _ = plain_ranks(w, o, d, u, users, key)
    rows = pd.DataFrame({"week": w, "origin": o, "destination": d, "kept": rank < m})
    g = rows.groupby(["week", "origin", "destination"], sort=True)["kept"]
    return g.size().to_numpy(float), g.sum().to_numpy(float)


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
def test_city_selection_table_expects_what_the_definitions_give(city, km):
    """compare_selection on the week's pairs and on the week prepared once: per strategy, the expected pairs and
    user-trips published are the sums of each definition's keep probability over the plain bounded counts (the
    truncated geometric's: of its own keep probabilities, checked against the DP constraints below)."""
    pairs = city[km]
    week = int(pairs["week"].iloc[0])
    prep = prepare_pairs(pairs)
    for seed, eps, m in ((1, 1.0, 10), (7, 0.5, 3), (123, 2.0, 1)):
        raw, n = plain_counts(pairs, week, m, seed)
        live = n > 0
        tables = [compare_selection(pairs, epsilon=eps, max_pairs=m, week=week, rng=seed, pipeline_dp=False),
                  compare_selection(prep, epsilon=eps, max_pairs=m, week=week, rng=seed, pipeline_dp=False)]
        pd.testing.assert_frame_equal(tables[0], tables[1])
        got = tables[0].set_index("strategy")
        assert tables[0].attrs["pairs"] == int(live.sum())
        assert tables[0].attrs["user_pairs"] == int(raw.sum())
        for s in Strategy:
            keep = np.where(live, (paper_keep(s, n, eps, 1e-6, m) if s is not Strategy.TRUNCATED_GEOMETRIC
                                   else truncated_geometric_keep(n.astype(np.int64), eps / 2, 1e-6, m)), 0.0)
            row = got.loc[str(s)]
            assert row["pairs_expected"] == pytest.approx(keep.sum(), rel=1e-9, abs=1e-12), (s, seed)
            assert row["user_trips_expected"] == pytest.approx((keep * raw).sum(), rel=1e-9, abs=1e-12), (s, seed)


def test_city_selection_publishes_as_many_pairs_as_expected(city):
    """Over 8 seeds, each strategy's published pairs and user-trips against their expectations (sums of independent
    Bernoulli draws: within 5 standard deviations), and the same check rejects the lab's one-count strategy at an ε
    30 % off."""
    pairs = city[GRIDS[0]]
    week = int(pairs["week"].iloc[0])
    prep = prepare_pairs(pairs)
    eps, m = 1.0, 5
    sums = {s: np.zeros(6) for s in Strategy}
    for seed in range(8):
        raw, n = plain_counts(pairs, week, m, seed)
        live = n > 0
        got = compare_selection(prep, epsilon=eps, max_pairs=m, week=week, rng=seed, pipeline_dp=False)
        got = got.set_index("strategy")
        for s in Strategy:
            keep = np.where(live, (paper_keep(s, n, eps, 1e-6, m) if s is not Strategy.TRUNCATED_GEOMETRIC
                                   else truncated_geometric_keep(n.astype(np.int64), eps / 2, 1e-6, m)), 0.0)
            off = np.where(live, paper_keep(Strategy.LAB_ONE_COUNT, n, eps * 1.3, 1e-6, m), 0.0)
            row = got.loc[str(s)]
            sums[s] += [row["pairs_published"] - keep.sum(), (keep * (1 - keep)).sum(),
                        row["user_trips_published"] - (keep * raw).sum(), (raw**2 * keep * (1 - keep)).sum(),
                        row["pairs_published"] - off.sum(), (off * (1 - off)).sum()]
    for s, (d_pairs, v_pairs, d_trips, v_trips, d_off, v_off) in sums.items():
        assert abs(d_pairs) <= 5 * math.sqrt(v_pairs), s
        assert abs(d_trips) <= 5 * math.sqrt(v_trips), s
        if s is Strategy.LAB_ONE_COUNT:
            assert abs(d_off) > 5 * math.sqrt(v_off)


def test_truncated_geometric_keep_is_the_largest_dp_selection():
    """Desfontaines et al. 2022, Theorem 1: the keep probabilities π(n) of the optimal (ε, δ) partition selection
    meet, for every n >= 1, both DP constraints between neighbours n − 1 and n, π(n) <= e^ε·π(n−1) + δ and
    1 − π(n−1) <= e^ε·(1 − π(n)) + δ, with π(0) = 0, and each π(n) is as large as they allow (one of the two is
    tight, or π(n) = 1). A person in m partitions gives each ε/m and 1 − (1 − δ)^(1/m), which compose to (ε, δ)."""
    for eps, delta, m in ((1.0, 1e-6, 1), (0.3, 1e-5, 4), (2.0, 1e-9, 10)):
        pi = truncated_geometric_keep(np.arange(0, 4000), eps, delta, m)
        e, d = eps / m, 1 - (1 - delta) ** (1 / m)
        assert 1 - (1 - d) ** m == pytest.approx(delta, rel=1e-9)
        assert pi[0] == 0.0
        prev, cur = pi[:-1], pi[1:]
        assert np.all(cur <= math.exp(e) * prev + d + 1e-12)
        assert np.all(1 - prev <= math.exp(e) * (1 - cur) + d + 1e-12)
        largest = np.minimum.reduce([math.exp(e) * prev + d, 1 - (1 - prev - d) / math.exp(e), np.ones_like(prev)])
        np.testing.assert_allclose(cur, largest, rtol=1e-12, atol=1e-15)
        assert pi[-1] == 1.0
        assert np.all(np.diff(pi) >= 0)


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


def test_keep_probability_is_each_definition():
    """Integer and float counts: the lab's two one-count strategies and Laplace thresholding against their
    definitions (scipy.stats' Laplace and normal laws, the thresholds found by bisection)."""
    n = np.random.default_rng(0).integers(0, 3000, 20_000)
    for s in (Strategy.LAB_ONE_COUNT, Strategy.LAB_GAUSSIAN_ONE_COUNT, Strategy.LAPLACE_THRESHOLDING):
        for eps, m in ((1.0, 10), (0.3, 1), (4.0, 25)):
            want = paper_keep(s, n, eps, 1e-6, m)
            np.testing.assert_allclose(keep_probability(s, n, eps, 1e-6, m), want, rtol=1e-7, atol=1e-300)
            np.testing.assert_allclose(keep_probability(s, n.astype(float), eps, 1e-6, m), want, rtol=1e-7,
                                       atol=1e-300)
    # a pair of one person is published with the chance the thresholds were fitted to: 1 − (1 − p)^m = δ
    for eps, m in ((1.0, 10), (0.5, 3)):
        p = keep_probability(Strategy.LAB_ONE_COUNT, np.array([1]), eps, 1e-6, m)[0]
        assert 1 - (1 - p) ** m == pytest.approx(1e-6, rel=1e-6)


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
            _raw, n = plain_counts(pairs, week, 4, 5)
            keep = paper_keep(Strategy.LAB_ONE_COUNT, n[n > 0], 1.0, 1e-6, 4)
            assert a.set_index("strategy").loc[str(Strategy.LAB_ONE_COUNT), "pairs_expected"] == pytest.approx(
                keep.sum(), rel=1e-9)
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
