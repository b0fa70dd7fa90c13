"""End-to-end Knock Knock experiments on fixtures with known answers, features and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from odcore.errors import ParameterError
from odcore.knock import KnockConfig, MREConfig, build_timeseries, mre_table, run_experiment
from odcore.knock.features import STATS, extract_features, feature_names, select_features
from odcore.knock.timeseries import TimeSeriesConfig

T0 = pd.Timestamp("2024-01-01", tz="UTC")
BOX = (45.0, 7.0, 45.1, 7.1)
SMALL = {"n_train": 40, "n_test": 20, "n_groups": 40, "beta": 20}


def city(n_users=40, weeks=3, points=400, seed=0, identical=False):
    """Random users, each around a home location, ``points`` fixes per week at random hours."""
    rng = np.random.default_rng(seed)
    hours = 168 * weeks
    n = points * weeks
    if identical:  # every user has exactly the same trace
        h = rng.uniform(0, hours, n)
        lat = 45.05 + 0.02 * rng.standard_normal(n)
        lon = 7.05 + 0.02 * rng.standard_normal(n)
        u = np.repeat(np.arange(n_users), n)
        h, lat, lon = np.tile(h, n_users), np.tile(lat, n_users), np.tile(lon, n_users)
    else:
        u = np.repeat(np.arange(n_users), n)
        home = rng.uniform(45.01, 45.09, (n_users, 2))
        h = rng.uniform(0, hours, u.size)
        lat = home[u, 0] + 0.01 * rng.standard_normal(u.size)
        lon = home[u, 1] - 45 + 7 + 0.01 * rng.standard_normal(u.size)
    return pd.DataFrame({"user": [f"c{i:02d}" for i in u], "time": T0 + pd.to_timedelta(h, unit="h"),
                         "lat": lat, "lon": lon})


@pytest.fixture(scope="module")
def series():
    return build_timeseries(city(), TimeSeriesConfig(grid="bbox", bbox=BOX, shape=(5, 5)))


def test_m1_the_aggregate_is_the_user_auc_1(series):
    cfg = KnockConfig(prior="subset", m=1, alpha=0.5, targets=3, classifiers="lr,knn,rf", allow_repeats=True,
                      seed=1, **SMALL)
    res = run_experiment(series, cfg)
    assert len(res.per_target) == 3
    for t in res.per_target:
        # the target's own series is in the training set; k-NN can tie when the target is an unknown user's
        # nearest neighbour (all 5 neighbours are copies of it), so only the best classifier must be perfect
        assert min(t.auc.values()) >= 0.8
        assert t.best()[1] >= 0.99
    assert res.mean_pl["best"] >= 0.98


def test_identical_users_auc_half():
    ts = build_timeseries(city(n_users=30, identical=True), TimeSeriesConfig(grid="bbox", bbox=BOX, shape=(5, 5)))
    for prior in ("subset", "different-groups"):
        cfg = KnockConfig(prior=prior, m=4, alpha=0.5, targets=1, classifiers="lr,knn,rf,mlp", seed=2, **SMALL)
        res = run_experiment(ts, cfg)
        for t in res.per_target:
            for name, a in t.auc.items():
                assert a == pytest.approx(0.5), (prior, name)  # in- and out-aggregates are identical
            assert t.pl == {k: 0.0 for k in t.pl}


def test_small_groups_leak_membership(series):
    cfg = KnockConfig(prior="same-groups", m=3, targets=3, classifiers="lr,rf", seed=3, **SMALL)
    res = run_experiment(series, cfg)
    assert res.mean_auc["best"] > 0.8  # homes are distinct: small aggregates reveal the target


def test_defences_privacy_gain(series):
    base = dict(prior="perfect", m=5, targets=2, classifiers="lr", seed=4, **SMALL)
    strong = run_experiment(series, KnockConfig(defence="lpa", epsilon=0.001, **base))
    weak = run_experiment(series, KnockConfig(defence="lpa-event", epsilon=1000, **base))
    for t in strong.per_target + weak.per_target:
        assert t.auc_raw["lr"] >= 0.95  # perfect prior on raw aggregates
    assert strong.mean_pg["lr"] > 0.6  # huge noise: close to random guessing
    assert weak.mean_pg["lr"] < 0.1  # negligible noise: no protection
    assert strong.mre > weak.mre
    noisy = run_experiment(series, KnockConfig(defence="gsm", epsilon=1.0, train_on_noisy=True, **base))
    assert noisy.mean_pg is not None
    assert noisy.sensitivity == strong.sensitivity == series.sensitivity(0, 168)


def test_same_seed_same_result(series):
    cfg = KnockConfig(prior="subset", m=4, alpha=0.5, targets=2, classifiers="lr,rf", seed=5, **SMALL)
    a = run_experiment(series, cfg).to_dict()
    b = run_experiment(series, cfg).to_dict()
    assert a["per_target"] == b["per_target"]


def test_progress_and_result_dict(series):
    calls = []
    cfg = KnockConfig(prior="subset", m=4, alpha=0.5, targets=3, classifiers="lr", seed=6, **SMALL)
    res = run_experiment(series, cfg, progress=lambda d, n, msg: calls.append((d, n)))
    assert calls == [(0, 3), (1, 3), (2, 3), (3, 3)]
    d = res.to_dict(with_roc=True)
    json.dumps(d)
    assert set(d["per_target"][0]) >= {"target", "auc", "pl", "roc", "mobility"}
    assert {t["mobility"] for t in d["per_target"]} == {"high", "mild", "somewhat"}
    assert set(d["mean_auc"]) == {"lr", "best"}


def test_mre_table_shape(series):
    out = mre_table(series, MREConfig(epsilons=(0.1, 10.0), m=10, n_groups=5))
    assert set(out["mre"]) == {"lpa", "lpa-event", "gsm", "fpa", "efpag"}
    for row in out["mre"].values():
        assert row["0.1"] > row["10"]  # more noise, more error
    assert out["mre"]["lpa"]["10"] > out["mre"]["lpa-event"]["10"]  # Δ/ε vs 1/ε


def test_features_match_reference_and_names():
    rng = np.random.default_rng(0)
    a = rng.poisson(3, (6, 101, 168)).astype(float)
    f = extract_features(a, chunk=4)
    assert f.shape == (6, 707)  # 7 × 101 ROIs, as in §V-B
    ref = np.stack([a.var(axis=2), a.min(axis=2), a.max(axis=2), np.median(a, axis=2), a.mean(axis=2),
                    a.std(axis=2), a.sum(axis=2)], axis=1).reshape(6, -1)
    np.testing.assert_allclose(f, ref, rtol=1e-10, atol=1e-9)
    names = feature_names([f"r{i}" for i in range(101)])
    assert names[0] == f"{STATS[0]}__r0"
    assert names[101] == "minimum__r0"


def test_feature_selection():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(30, 80))
    x[:, 5] = 1.0  # constant
    y = np.r_[np.zeros(15), np.ones(15)]
    assert not select_features(x, y, "variance")[5]
    assert select_features(x, y, "none").all()
    keep = select_features(x, y, "rfe-fast")
    assert keep.sum() == 30  # down to the number of training samples (§V-B)
    assert not keep[5]


def test_config_errors():
    with pytest.raises(ParameterError, match="classifier"):
        KnockConfig(classifiers="svm")
    with pytest.raises(ParameterError, match="epsilon"):
        KnockConfig(defence="lpa")
    with pytest.raises(ParameterError, match="prior"):
        KnockConfig(prior="oracle")
    with pytest.raises(ParameterError, match="train_on_noisy"):
        KnockConfig(train_on_noisy=True)


def test_cli_knock_and_defences(tmp_path, capsys):
    from odcore.cli import main

    path = tmp_path / "city.parquet"
    city(n_users=30, weeks=2).to_parquet(path)
    base = ["--input", str(path), "--grid", "bbox", "--grid-bbox", "45,7,45.1,7.1", "--grid-shape", "4x4"]
    rc = main(["knock", *base, "--prior", "subset", "--alpha", "0.5", "--m", "3", "--targets", "3",
               "--classifiers", "lr,knn", "--n-train", "30", "--n-test", "10", "--seed", "1", "--json"])
    assert rc == 0
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert len(out["per_target"]) == 3
    assert set(out["mean_auc"]) == {"lr", "knn", "best"}
    assert "seconds" in out
    assert "3/3" in cap.err  # progress on stderr, one line per target
    rc = main(["defences", *base, "--epsilon", "0.1,1", "--m", "5", "--groups", "3", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["mre"]["lpa"]) == {"0.1", "1"}
    assert out["sensitivity"] > 0
    assert main(["knock", *base, "--m", "500", "--targets", "1"]) == 2  # domain error -> exit 2
    assert "error:" in capsys.readouterr().err
    cache = tmp_path / "series.npz"
    args = ["defences", *base, "--epsilon", "1", "--m", "5", "--groups", "2", "--series-cache", str(cache)]
    assert main(args) == 0
    assert "built location time-series" in capsys.readouterr().err
    assert main(args) == 0
    assert "reusing" in capsys.readouterr().err
    assert main([*args, "--grid-shape", "3x3"]) == 0  # changed options: rebuilt, not reused
    assert "built location time-series" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.realdata
def test_real_cabspotting_sfc_matches_paper_statistics(shared_data):
    from odcore.data.traces import load_traces

    tr = load_traces(shared_data / "cabspotting_sf", format="cabspotting", tz="America/Los_Angeles", bbox=None)
    ts = build_timeseries(tr.df, TimeSeriesConfig(grid="sfc", tz="America/Los_Angeles"))
    assert ts.n_users == 534
    assert ts.n_rois == 101
    assert ts.n_slots == 504  # 101 × 504 as in §V-A
    rep = ts.reports()
    assert rep.mean() == pytest.approx(3827, rel=0.05)  # paper: 3,827 ± 1,069
    assert ts.sensitivity(0, 168) == pytest.approx(2685, rel=0.05)  # paper: Δ = 2,685
    res = run_experiment(ts, KnockConfig(prior="subset", m=10, targets=3, classifiers="lr,mlp", seed=1))
    assert res.mean_auc["best"] > 0.75  # paper: LR and MLP mean AUC 0.9 at m = 10


def test_workers_play_the_same_game(series):
    """Targets in 2 worker processes: each has its own random stream, so the result is the serial one."""
    cfg = KnockConfig(prior="same-groups", m=3, targets=3, classifiers="lr,rf", seed=7, **SMALL)
    serial = run_experiment(series, cfg, workers=1)
    parallel = run_experiment(series, cfg, workers=2)
    assert parallel.workers == 2
    assert [t.to_dict() for t in parallel.per_target] == [t.to_dict() for t in serial.per_target]
    assert set(parallel.timings) == set(serial.timings)


def test_target_streams_are_independent(series):
    """A target's game depends on the seed and its position only: the same targets named by id play the same game."""
    base = dict(prior="subset", m=4, alpha=0.5, classifiers="lr,knn", seed=8, **SMALL)
    three = run_experiment(series, KnockConfig(targets=3, **base))
    ids = tuple(t.target for t in three.per_target)
    again = run_experiment(series, KnockConfig(target_ids=ids, **base))
    other = run_experiment(series, KnockConfig(target_ids=ids, **(base | {"seed": 9})))
    assert [t.to_dict() for t in again.per_target] == [t.to_dict() for t in three.per_target]
    assert [t.auc for t in other.per_target] != [t.auc for t in again.per_target]


def test_play_order_takes_the_thirds_in_turn():
    from odcore.knock.experiment import play_order

    classes = ["high"] * 3 + ["mild"] * 3 + ["somewhat"] * 2
    order = play_order(classes)
    assert sorted(order) == list(range(8))
    assert [classes[i] for i in order[:6]] == ["high", "mild", "somewhat"] * 2


# a tiny training set on purpose (the scores' ties are what is checked): the network stops at its epoch cap
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_mlp_scores_are_predict_proba_without_float32_ties():
    from threadpoolctl import threadpool_limits

    from odcore.knock.classifiers import fit_scores, make_classifier, mlp_scores

    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 30))
    y = (np.arange(200) % 2).astype(int)
    x[:, 0] = np.where(y == 1, 1.0, -1.0) + 0.01 * x[:, 0]  # far apart after scaling: outputs near 0 and 1
    pipe64 = make_classifier("mlp", seed=1, float32=False).fit(x, y)
    assert np.allclose(mlp_scores(pipe64, x), pipe64.predict_proba(x)[:, 1], rtol=0, atol=1e-12)
    # trained as fit_scores trains it, on one BLAS thread: float32 sums split over threads round differently, and a
    # network trained from them drifts apart
    with threadpool_limits(limits=1, user_api="blas"):
        pipe32 = make_classifier("mlp", seed=1).fit(x, y)
    assert pipe32[-1].coefs_[0].dtype == np.float32
    s32 = mlp_scores(pipe32, x)
    assert np.allclose(s32, pipe32.predict_proba(x)[:, 1], atol=1e-5)    # the same network's output ...
    far = 4 * x                                       # ... and on points beyond the training data (logits ~ 20),
    p_far = pipe32.predict_proba(far)[:, 1]           # where the float32 sigmoid rounds most to exactly 1 or 0
    assert len(np.unique(mlp_scores(pipe32, far))) > len(np.unique(p_far)) + 20
    (s,) = fit_scores("mlp", x, y, [x], seed=1)
    assert np.array_equal(s, np.round(s32, 10))


def test_mlp_float32_gives_the_float64_auc(series):
    """The fast path (float32 MLP) against the float64 one on small games: the same AUC within 0.02 per target.

    Single precision changes the gradients in the 7th digit; the network and its stopping epoch can then differ
    slightly, which moves a few of the ~400 in/out score pairs of a 20-group test set at most.
    """
    for prior, m in (("subset", 4), ("same-groups", 3)):
        cfg = KnockConfig(prior=prior, m=m, alpha=0.5, targets=3, classifiers="mlp", seed=10, **SMALL)
        fast = run_experiment(series, cfg)
        slow = run_experiment(series, cfg, float32=False)
        for a, b in zip(fast.per_target, slow.per_target, strict=True):
            assert a.auc["mlp"] == pytest.approx(b.auc["mlp"], abs=0.02), prior
        assert fast.mean_auc["mlp"] == pytest.approx(slow.mean_auc["mlp"], abs=0.01)


@pytest.mark.slow
@pytest.mark.realdata
def test_real_cabspotting_mlp_float32_as_float64(shared_data, tmp_path):
    """On the SFC games of §VI-C (same groups, m = 100, one week) the float32 MLP keeps the float64 AUC."""
    from odcore.data.traces import load_traces

    tr = load_traces(shared_data / "cabspotting_sf", format="cabspotting", tz="America/Los_Angeles", bbox=None)
    ts = build_timeseries(tr.df, TimeSeriesConfig(grid="sfc", tz="America/Los_Angeles"))
    cfg = KnockConfig(prior="same-groups", m=100, targets=3, classifiers="mlp", seed=6)
    fast, slow = run_experiment(ts, cfg), run_experiment(ts, cfg, float32=False)
    for a, b in zip(fast.per_target, slow.per_target, strict=True):
        assert a.auc["mlp"] == pytest.approx(b.auc["mlp"], abs=0.01)
