"""The attacker pool and the game's rounds are exactly what they were: ``AttackerPool.from_pairs`` (integer ids by
table lookup, rows as ODData gives them without a sort) against the former formulation kept below, array for array
and dtype for dtype, on the bundled city at three grids and on rows that take every branch; ``round_others`` against rounds drawn from
``numpy.random.default_rng((seed, k, j))``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from odcore.errors import ParameterError
from odcore.paths import REPO_ROOT
from odcore.report import teaching as T

SAMPLE = REPO_ROOT / "sample_data" / "synthetic_city.parquet"
FIELDS = ("users", "start", "origin", "destination", "others")


def _first_of_runs(v):
    first = np.ones(v.size, dtype=bool)
    np.not_equal(v[1:], v[:-1], out=first[1:])
    return first


def reference_pool(pairs: pd.DataFrame, counts: pd.DataFrame | None = None) -> dict:
    """``AttackerPool.from_pairs`` as it was (pandas.factorize codes, a sort of the keys), as a dict of arrays."""
    need = ["user", "origin", "destination"]
    codes = {c: pd.factorize(pairs[c], sort=True) for c in need}
    for c, (code, _) in codes.items():
        if (code < 0).any():
            raise ParameterError(f"pairs has {int((code < 0).sum())} missing value(s) in column {c!r}.")
    (uc, users), (oc, ov), (dc, dv) = codes.values()
    n_od = ov.size * dv.size
    key = np.sort(uc.astype(np.int64) * n_od + oc * dv.size + dc)
    key = key[_first_of_runs(key)]
    pair = key % n_od
    dense = n_od <= max(4 * pair.size, 1 << 22)
    slot_ids = None if dense else np.unique(pair)
    slot = pair if dense else np.searchsorted(slot_ids, pair)
    own = np.bincount(slot, minlength=n_od if dense else slot_ids.size)
    if counts is None:
        count = own.astype(float)
    else:
        co, cd = ov.get_indexer(counts["origin"]), dv.get_indexer(counts["destination"])
        known = (co >= 0) & (cd >= 0)
        ckey = co[known].astype(np.int64) * dv.size + cd[known]
        cval = counts["count"].to_numpy(dtype=float)[known]
        if not dense:
            at = np.minimum(np.searchsorted(slot_ids, ckey), slot_ids.size - 1)
            keep = slot_ids[at] == ckey
            ckey, cval = at[keep], cval[keep]
        count = np.full(own.size, np.nan)
        count[ckey] = cval
        bad = (own > 0) & ~(count >= own)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            code = i if dense else int(slot_ids[i])
            what = (f"count {count[i]:g} < {int(own[i])} people in pairs" if count[i] == count[i]
                    else "no count in counts")
            raise ParameterError(f"counts disagree with pairs on {int(bad.sum())} pair(s), e.g. origin "
                                 f"{ov[code // dv.size]}, destination {dv[code % dv.size]}: {what}.")
    start = np.append(np.flatnonzero(np.diff(key // n_od, prepend=-1)), key.size).astype(np.int64)
    return {"users": np.asarray(users), "start": start, "origin": np.asarray(ov)[pair // dv.size],
            "destination": np.asarray(dv)[pair % dv.size], "others": count[slot] - 1.0}


def _same_pool(pairs, counts=None):
    got = T.AttackerPool.from_pairs(pairs, counts)
    want = reference_pool(pairs, counts)
    for name in FIELDS:
        g, w = getattr(got, name), want[name]
        assert g.dtype == w.dtype, name
        np.testing.assert_array_equal(g, w, err_msg=name, strict=True)
    return got


@pytest.fixture(scope="module")
def city():
    from odcore.data.traces import load_traces
    from odcore.od.trips import ODConfig, build_od

    if not SAMPLE.is_file():
        pytest.skip("bundled sample missing (make sample-data)")
    df = load_traces(SAMPLE).df
    return {cell: build_od(df, ODConfig(cell_km2=cell)) for cell in (1.3, 1.5, 1.6)}


@pytest.mark.parametrize("cell", [1.3, 1.5, 1.6])
def test_city_pool_is_the_former_pool(city, cell):
    from odcore.od.pairs import bound_contributions

    od = city[cell]
    week = int(od.pairs["week"].iloc[0])
    pool = _same_pool(od.week_pairs(week), od.week_counts(week))
    _same_pool(od.week_pairs(week), od.counts.drop(columns="week"))
    _same_pool(bound_contributions(od.week_pairs(week), 5, rng=3)[0])     # the per-user release's pairs
    # the rounds: drawn as default_rng((seed, k, j)) draws them
    for k, seed in ((1, 0), (3, 7), (10, 2 ** 20 - 1), (32, 12345)):
        np.testing.assert_array_equal(T.round_others(pool, k, seed, 200), pool.others[_rounds(pool, k, seed, 200)],
                                      strict=True)


def _rounds(pool, k: int, seed: int, rounds: int) -> np.ndarray:
    """The pair rows of the rounds as numpy's generator draws them."""
    who = pool.eligible(k)
    rows = []
    for j in range(rounds):
        rng = np.random.default_rng((seed, k, j))
        i = int(who[rng.integers(who.size)])
        rows.append(pool.start[i] + rng.choice(pool.start[i + 1] - pool.start[i], size=k, replace=False))
    return np.stack(rows)


def test_rows_of_every_kind_give_the_former_pool():
    rng = np.random.default_rng(0)
    n = 3000
    pairs = pd.DataFrame({"user": rng.integers(-50, 300, n), "origin": rng.integers(5, 80, n),
                          "destination": rng.integers(-9, 70, n)})
    shuffled = pd.concat([pairs, pairs.sample(400, random_state=1)]).sample(frac=1, random_state=2)
    own = shuffled.drop_duplicates().groupby(["origin", "destination"]).size().rename("count").reset_index()
    counts = pd.concat([own.assign(count=own["count"] + rng.integers(0, 9, len(own))),
                        pd.DataFrame({"origin": [10**6, 6], "destination": [1, 10**6], "count": [4, 4]})])
    ordered = shuffled.drop_duplicates().sort_values(["user", "origin", "destination"])
    for p in (shuffled, ordered):
        _same_pool(p, counts)
        _same_pool(p)
        _same_pool(p.astype({"user": np.int32, "origin": np.int16, "destination": np.int32}),
                   counts.astype({"origin": np.int64, "count": np.int32}))
        _same_pool(p.assign(user="p" + p["user"].astype(str)), counts)
        _same_pool(p.astype({"origin": float}), counts)
        _same_pool(p.assign(user=p["user"] + 50).astype({"user": np.uint16}), counts.astype({"count": float}))
        # ids spread over a wide range: factorized, and ranked rather than given a slot each
        wide = p.assign(origin=p["origin"] * 10**7, destination=p["destination"] * 10**7 + 3)
        _same_pool(wide, counts.assign(origin=counts["origin"] * 10**7, destination=counts["destination"] * 10**7 + 3))
    low = counts.assign(count=1)
    for bad in (low, counts.iloc[5:]):
        with pytest.raises(ParameterError) as want:
            reference_pool(ordered, bad)
        with pytest.raises(ParameterError) as got:
            T.AttackerPool.from_pairs(ordered, bad)
        assert str(got.value) == str(want.value)
