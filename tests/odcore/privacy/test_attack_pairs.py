"""``user_pairs_with_counts`` (the week's (user, pair) rows with the others' count on each pair) by integer codes
equals, frame for frame, the pandas formulation it replaced (kept below as the reference), on the bundled city at
three grids and on rows built to take every branch: shuffled, repeated, several weeks, text ids, narrow dtypes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from odcore.errors import ParameterError
from odcore.paths import REPO_ROOT
from odcore.privacy import attack as A

SAMPLE = REPO_ROOT / "sample_data" / "synthetic_city.parquet"


def reference(pairs: pd.DataFrame, counts: pd.DataFrame | None, week: int) -> tuple[pd.DataFrame, dict]:
    """The pandas formulation (drop_duplicates, groupby, merge), as it was before the integer-code path."""
    need = ["week", "user", "origin", "destination"]
    missing = [c for c in need if c not in pairs.columns]
    if missing:
        raise ParameterError(f"pairs must have columns {need}; missing {missing}.")
    wk = pairs.loc[pairs["week"] == week, need]
    if wk.empty:
        weeks = sorted(pd.unique(pairs["week"]).tolist())
        raise ParameterError(f"week={week!r} has no pairs; weeks present: {weeks[:20]}.")
    n_in = len(wk)
    wk = wk.drop_duplicates()
    report = {"pairs_rows": n_in, "duplicate_rows_dropped": n_in - len(wk)}
    own = wk.groupby(["origin", "destination"], sort=False).size().rename("_n").reset_index()
    if counts is None:
        cnt = own.rename(columns={"_n": "count"})
    else:
        missing = [c for c in ("week", "origin", "destination", "count") if c not in counts.columns]
        if missing:
            raise ParameterError(f"counts must have columns week, origin, destination, count; missing {missing}.")
        cnt = counts.loc[counts["week"] == week, ["origin", "destination", "count"]]
        chk = own.merge(cnt, on=["origin", "destination"], how="left")
        bad = chk["count"].isna() | (chk["count"] < chk["_n"])
        if bad.any():
            row = chk.loc[bad].iloc[0]
            raise ParameterError(
                f"counts for week {week} disagree with pairs on {int(bad.sum())} pair(s), e.g. origin "
                f"{row['origin']}, destination {row['destination']}: count {row['count']} < {int(row['_n'])} users "
                "in pairs.")
    df = wk.merge(cnt[["origin", "destination", "count"]], on=["origin", "destination"], how="left")
    df["others"] = df["count"].astype(float) - 1.0
    return df, report


def _same(pairs, counts, week):
    got, got_report = A.user_pairs_with_counts(pairs, counts, week)
    want, want_report = reference(pairs, counts, week)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert got_report == want_report
    return got


@pytest.fixture(scope="module")
def city_weeks():
    from odcore.data.traces import load_traces
    from odcore.od.trips import ODConfig, build_od

    if not SAMPLE.is_file():
        pytest.skip("bundled sample missing (make sample-data)")
    df = load_traces(SAMPLE).df
    return {cell: build_od(df, ODConfig(cell_km2=cell)) for cell in (1.3, 1.5, 1.6)}


@pytest.mark.parametrize("cell", [1.3, 1.5, 1.6])
def test_city_rows_are_the_pandas_rows(city_weeks, cell, monkeypatch):
    """On the city's week (as the Attack page passes it: ODData's sorted distinct pairs and its counts) the result is
    the reference's, and the integer-code path is the one taken (the pandas one is made to fail)."""
    od = city_weeks[cell]
    week = int(od.pairs["week"].iloc[0])
    pairs, counts = od.week_pairs(week), od.counts
    want, want_report = reference(pairs, counts, week)
    want_none, _ = reference(pairs, None, week)

    def refuse(*args):
        raise AssertionError("the pandas formulation was used")

    monkeypatch.setattr(A, "_pairs_with_counts_frames", refuse)
    got, got_report = A.user_pairs_with_counts(pairs, counts, week)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert got_report == want_report
    pd.testing.assert_frame_equal(A.user_pairs_with_counts(pairs, None, week)[0], want_none, check_exact=True)


def _toy(seed: int = 0, n: int = 4000, weeks=(0, 1, 3)) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    pairs = pd.DataFrame({"week": rng.choice(weeks, n), "user": rng.integers(-5, 400, n),
                          "origin": rng.integers(10, 60, n), "destination": rng.integers(-3, 50, n)})
    pairs = pd.concat([pairs, pairs.sample(300, random_state=seed)]).sample(frac=1, random_state=seed + 1)
    own = pairs.drop_duplicates().groupby(["week", "origin", "destination"]).size().rename("count").reset_index()
    extra = pd.DataFrame({"week": [0, 0, 1], "origin": [10**6, 5, 11], "destination": [3, 10**6, 10**7],
                          "count": [4, 4, 4]})
    counts = pd.concat([own.assign(count=own["count"] + rng.integers(0, 5, len(own))), extra])
    return pairs.reset_index(drop=True), counts.sample(frac=1, random_state=seed + 2).reset_index(drop=True)


@pytest.mark.parametrize("seed", [0, 1])
def test_shuffled_repeated_rows_over_several_weeks(seed, monkeypatch):
    pairs, counts = _toy(seed)
    for week in (0, 1, 3):
        got = _same(pairs, counts, week)
        assert (got["week"] == week).all()
        _same(pairs, None, week)
    # the integer-code path answers these (nothing falls back)
    monkeypatch.setattr(A, "_pairs_with_counts_frames", None)
    A.user_pairs_with_counts(pairs, counts, 1)
    A.user_pairs_with_counts(pairs, None, 3)


def test_dtypes_and_ids_of_every_kind():
    """Narrow integer columns, float counts, text users, float zone ids: the frames as pandas makes them."""
    pairs, counts = _toy(2)
    _same(pairs.astype({"user": np.int32, "origin": np.int32, "week": np.int16}),
          counts.astype({"origin": np.int16, "count": np.int32}), 1)
    _same(pairs, counts.astype({"count": float}), 0)
    _same(pairs, counts.astype({"count": np.uint32}), 0)
    _same(pairs.assign(user="p" + pairs["user"].astype(str)), counts, 0)
    _same(pairs.astype({"origin": float}), counts, 3)
    _same(pairs, counts.astype({"destination": float}), 3)
    _same(pairs.assign(user=pairs["user"] + 5).astype({"user": np.uint16}), counts, 1)


def test_counts_listing_a_pair_twice_multiply_rows_as_the_merge_does():
    pairs, counts = _toy(3)
    dup = pd.concat([counts, counts.iloc[:5]])
    _same(pairs, dup, int(counts["week"].iloc[0]))


@pytest.mark.parametrize("week", [0, 1])
def test_errors_are_the_reference_errors(week):
    pairs, counts = _toy(4, weeks=(0, 1))
    cw = counts["week"] == week
    low = counts.copy()
    low.loc[cw & (counts["origin"] < 1000), "count"] = 0       # below the people on them
    missing_pair = counts.drop(index=counts.index[cw & (counts["origin"] < 1000)][3])
    nan_count = counts.astype({"count": float})
    nan_count.loc[counts.index[cw][0], "count"] = np.nan
    for bad in (low, missing_pair, nan_count, counts.drop(columns="week")):
        with pytest.raises(ParameterError) as want:
            reference(pairs, bad, week)
        with pytest.raises(ParameterError) as got:
            A.user_pairs_with_counts(pairs, bad, week)
        assert str(got.value) == str(want.value)
    for bad_pairs, wk in ((pairs, 7), (pairs.drop(columns="user"), week)):
        with pytest.raises(ParameterError) as want:
            reference(bad_pairs, counts, wk)
        with pytest.raises(ParameterError) as got:
            A.user_pairs_with_counts(bad_pairs, counts, wk)
        assert str(got.value) == str(want.value)


def test_integer_ranks_are_factorize_codes():
    rng = np.random.default_rng(5)
    v = rng.integers(-1000, 1000, 5000)
    ranks = A.integer_ranks(v, 10_000)
    codes, uniques = pd.factorize(v, sort=True)
    np.testing.assert_array_equal(ranks[0], codes)
    np.testing.assert_array_equal(A.integer_codes(v, ranks), codes)
    absent = np.setdiff1d(np.arange(-1000, 1000), v)[:2]
    np.testing.assert_array_equal(A.integer_codes(np.array([-2000, 5000, *absent, *uniques[:3]]), ranks),
                                  [-1, -1, -1, -1, 0, 1, 2])
    assert A.integer_ranks(v, 1000) is None            # spans more than the limit
    assert A.integer_ranks(v.astype(float), 10_000) is None


# ---- one person's others (the Attack page's real person) ---------------------------------------------------------

def _person_reference(pairs, counts, week, user) -> np.ndarray:
    df, _ = reference(pairs, counts, week)
    return df["others"].to_numpy(dtype=float)[(df["user"] == user).to_numpy()]


def _same_person(pairs, counts, week, user):
    got = A.person_others(pairs, counts, week, user)
    np.testing.assert_array_equal(got, _person_reference(pairs, counts, week, user), strict=True)
    return got


def test_person_others_on_the_city(city_weeks, monkeypatch):
    """The busiest, the quietest and 15 other people of the city's week at three grids, per metric (counts) and with
    the rows' own counts; the whole-week table is never made (it is made to fail)."""
    monkeypatch.setattr(A, "_person_others_of_week", None)
    rng = np.random.default_rng(7)
    for od in city_weeks.values():
        week = int(od.pairs["week"].iloc[0])
        pairs, counts = od.week_pairs(week), od.counts
        per_user = pairs.groupby("user").size()
        users = [per_user.idxmax(), per_user.idxmin(), *rng.choice(per_user.index.to_numpy(), 15, replace=False)]
        df_c, _ = reference(pairs, counts, week)
        df_n, _ = reference(pairs, None, week)
        for user in users:
            for df, cnt in ((df_c, counts), (df_n, None)):
                want = df["others"].to_numpy(dtype=float)[(df["user"] == user).to_numpy()]
                np.testing.assert_array_equal(A.person_others(pairs, cnt, week, user), want, strict=True)


@pytest.mark.parametrize("seed", [0, 1])
def test_person_others_on_shuffled_repeated_rows(seed):
    pairs, counts = _toy(seed)
    narrow = pairs.astype({"user": np.int32})
    for week in (0, 1, 3):
        for p, c in ((pairs, counts), (pairs, None), (narrow, counts.astype({"count": float}))):
            df, _ = reference(p, c, week)
            for user in (*p["user"].drop_duplicates().iloc[:25], 10_000):     # 10,000: nobody
                want = df["others"].to_numpy(dtype=float)[(df["user"] == user).to_numpy()]
                np.testing.assert_array_equal(A.person_others(p, c, week, user), want, strict=True)
    _same_person(pairs.assign(user="p" + pairs["user"].astype(str)), counts, 0, "p3")


def test_person_others_errors_and_what_it_checks():
    """A disagreement on the person's pairs raises as the whole week's table does; one on another pair is not read
    (the person's own numbers are right)."""
    pairs = pd.DataFrame({"week": 0, "user": [1, 1, 2, 3], "origin": [0, 0, 0, 5], "destination": [1, 2, 1, 6]})
    counts = pd.DataFrame({"week": 0, "origin": [0, 0, 5], "destination": [1, 2, 6], "count": [2, 1, 1]})
    np.testing.assert_array_equal(A.person_others(pairs, counts, 0, 1), [1.0, 0.0])
    for bad in (counts.assign(count=[1, 1, 1]), counts.iloc[1:]):   # below the people on it; no count
        with pytest.raises(ParameterError) as want:
            _person_reference(pairs, bad, 0, 1)
        with pytest.raises(ParameterError) as got:
            A.person_others(pairs, bad, 0, 1)
        assert str(got.value) == str(want.value)
    # a pair counted twice: the merge doubles the person's rows, and so does person_others
    twice = pd.concat([counts, counts.iloc[:1]])
    np.testing.assert_array_equal(A.person_others(pairs, twice, 0, 1), _person_reference(pairs, twice, 0, 1))
    assert len(_person_reference(pairs, twice, 0, 1)) == 3
    other_pair_wrong = counts.assign(count=[2, 1, 0])
    with pytest.raises(ParameterError):
        A.user_pairs_with_counts(pairs, other_pair_wrong, 0)
    np.testing.assert_array_equal(A.person_others(pairs, other_pair_wrong, 0, 1), [1.0, 0.0])
    with pytest.raises(ParameterError, match="weeks present"):
        A.person_others(pairs, counts, 4, 1)
