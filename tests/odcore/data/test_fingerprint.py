"""The trace fingerprint (odcore.data.fingerprint): a hash of the set of kept fixes, the same in pieces and in any
order, different for any changed, added or removed fix."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from odcore.data.fingerprint import TraceFingerprint, row_hashes, trace_fingerprint


def _traces(n: int, seed: int, ids: str = "text") -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    u = rng.integers(0, 50, n)
    return pd.DataFrame({"user": [f"u{x}" for x in u] if ids == "text" else u.astype(np.int64) * 7919,
                         "time": pd.to_datetime(1_700_000_000 + rng.integers(0, 10**6, n), unit="s", utc=True),
                         "lat": 45 + rng.random(n), "lon": 5 + rng.random(n)})


@pytest.mark.parametrize("ids", ["text", "int"])
def test_same_set_same_fingerprint_in_pieces_and_any_order(ids):
    df = _traces(5_000, 1, ids)
    whole = trace_fingerprint(df)
    shuffled = df.sample(frac=1.0, random_state=3)
    assert trace_fingerprint(shuffled) == whole
    # four pieces hashed apart (as Spark's executors or a shard each), merged in another order
    parts = [TraceFingerprint() for _ in range(4)]
    for p, idx in zip(parts, np.array_split(np.arange(len(shuffled)), 4), strict=True):
        sub = shuffled.iloc[idx]
        p.add(row_hashes(sub["user"], sub["time"], sub["lat"], sub["lon"]))
    merged = TraceFingerprint()
    for p in parts[::-1]:
        merged.merge(p)
    assert merged.hexdigest() == whole
    # the 32-bit halves summed as a SQL engine sums them give the same state back
    halves = [p.partial() for p in parts]
    sums = {k: sum(h[k] for h in halves) for k in halves[0]}
    assert all(v < 2**63 for v in sums.values())
    assert TraceFingerprint.from_halves(sums).hexdigest() == whole


def test_categorical_ids_and_time_forms_hash_as_the_plain_ones():
    df = _traces(500, 2)
    cat = df.assign(user=df["user"].astype("category"))
    assert trace_fingerprint(cat) == trace_fingerprint(df)
    ns = df["time"].to_numpy("datetime64[ns]").view(np.int64)
    np.testing.assert_array_equal(row_hashes(df["user"].to_numpy(), ns, df["lat"], df["lon"]),
                                  row_hashes(df["user"], df["time"], df["lat"], df["lon"]))


def test_any_change_changes_the_fingerprint():
    df = _traces(2_000, 4)
    base = trace_fingerprint(df)
    changed = [
        df.assign(lat=df["lat"].where(df.index != 17, df["lat"] + 1e-9)),          # one coordinate, a hair
        df.assign(time=df["time"].where(df.index != 5, df["time"] + pd.Timedelta(seconds=1))),
        df.assign(user=df["user"].where(df.index != 9, "someone else")),
        df.iloc[1:],                                                                 # a fix removed
        pd.concat([df, df.iloc[:1]]),                                                # a fix twice
        df.assign(user=df["user"].str[1:].astype(np.int64)),                         # ids as numbers, not text
    ]
    values = {trace_fingerprint(c) for c in changed}
    assert base not in values
    assert len(values) == len(changed)
    # two fixes swapping their users is a different set (the sum of row hashes is not a sum over columns)
    swap = df.copy()
    swap.loc[[0, 1], "user"] = swap.loc[[1, 0], "user"].to_numpy()
    assert (swap["user"] != df["user"]).any()
    assert trace_fingerprint(swap) != base


def test_the_empty_table_has_a_fingerprint():
    empty = _traces(3, 0).iloc[:0]
    assert len(trace_fingerprint(empty)) == 64
    assert trace_fingerprint(empty) != trace_fingerprint(_traces(1, 0))
