"""Teaching mode engine: rounds of the membership game, the optimal attacker's score against its theory, the noise
sentence against the release probability, class codes and the worksheet."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from odcore.errors import ParameterError
from odcore.paths import REPO_ROOT
from odcore.privacy.attack import pair_llr, success_curve
from odcore.privacy.release import ReleaseConfig, release, release_probability
from odcore.report import teaching as T

SAMPLE = REPO_ROOT / "sample_data" / "synthetic_city.parquet"
ALPHA = 1e-6


@pytest.fixture(scope="module")
def pool():
    from odcore.data.traces import load_traces
    from odcore.od.trips import ODConfig, build_od

    if not SAMPLE.is_file():
        pytest.skip("bundled sample missing (make sample-data)")
    od = build_od(load_traces(SAMPLE).df, ODConfig(cell_km2=1.3))
    return T.AttackerPool.from_pairs(od.week_pairs(0), od.week_counts(0))


def _toy_pool(others_per_user: list[list[int]]) -> T.AttackerPool:
    """People whose pairs are distinct and carry the given counts of others (count = others + 1)."""
    rows, counts, pair = [], [], 0
    for u, lst in enumerate(others_per_user):
        for c in lst:
            rows.append((f"u{u}", pair, pair + 1))
            counts.append((pair, pair + 1, c + 1))
            pair += 2
    return T.AttackerPool.from_pairs(pd.DataFrame(rows, columns=["user", "origin", "destination"]),
                                     pd.DataFrame(counts, columns=["origin", "destination", "count"]))


# ---- the LLR ---------------------------------------------------------------------------------------------------

def test_pair_llr_matches_laplace_densities():
    """pair_llr against scipy's Laplace log-density / log-CDF, computed the slow way, pair by pair."""
    eps, tau = 0.66, 100
    rng = np.random.default_rng(1)
    c = rng.integers(60, 140, size=300).astype(float)
    y = c + rng.uniform(-6, 7, size=300)
    pub = y >= tau
    got = pair_llr(c, pub, np.where(pub, y, np.nan), eps, tau)
    lap = stats.laplace(scale=1 / eps)
    want = [lap.logpdf(yy - cc - 1) - lap.logpdf(yy - cc) if p else lap.logcdf(tau - cc - 1) - lap.logcdf(tau - cc)
            for cc, yy, p in zip(c, y, pub, strict=True)]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert np.all(got >= -eps - 1e-12)
    assert np.all(got <= eps + 1e-12)


def test_pair_llr_far_below_threshold_is_tiny_negative_not_nan():
    v = pair_llr([0.0], [False], [np.nan], 0.66, 100)[0]
    assert np.isfinite(v)
    assert v < 0
    with pytest.raises(ParameterError, match="same shape"):
        pair_llr([1.0, 2.0], [True], [3.0], 0.66, 100)


# ---- the pool ------------------------------------------------------------------------------------------------

def _pool_by_pandas(pairs: pd.DataFrame, counts: pd.DataFrame | None) -> dict:
    """An independent reference for AttackerPool.from_pairs: distinct rows, counts by groupby/merge, sorted."""
    df = pairs[["user", "origin", "destination"]].drop_duplicates()
    cnt = (df.groupby(["origin", "destination"]).size().rename("count").reset_index() if counts is None
           else counts[["origin", "destination", "count"]])
    df = df.merge(cnt, on=["origin", "destination"]).sort_values(["user", "origin", "destination"], ignore_index=True)
    users, first = np.unique(df["user"].to_numpy(), return_index=True)
    return {"users": users, "start": np.append(first, len(df)), "origin": df["origin"].to_numpy(),
            "destination": df["destination"].to_numpy(), "others": df["count"].to_numpy(float) - 1.0}


def test_pool_matches_a_pandas_reference(pool):
    """from_pairs (sorted integer codes, no groupby/merge) equals groupby/merge/sort on the city's week, on the
    bounded pairs of a per-user release (counts from the pairs), and on shuffled rows with duplicates and text ids."""
    from odcore.data.traces import load_traces
    from odcore.od.pairs import bound_contributions
    from odcore.od.trips import ODConfig, build_od

    od = build_od(load_traces(SAMPLE).df, ODConfig(cell_km2=1.3))
    wp, wc = od.week_pairs(0), od.week_counts(0)
    shuffled = pd.concat([wp, wp.sample(500, random_state=1)]).sample(frac=1, random_state=2)
    shuffled["user"] = "p" + shuffled["user"].astype(str)
    bounded = bound_contributions(wp, 5, rng=3)[0]
    # few rows over many distinct origins × destinations: the pairs are ranked (sorted), not given a slot each
    rng = np.random.default_rng(4)
    sparse = pd.DataFrame({"user": rng.integers(0, 300, 3000), "origin": rng.integers(0, 10**6, 3000),
                           "destination": rng.integers(0, 10**6, 3000)})
    own = sparse.drop_duplicates().groupby(["origin", "destination"]).size().rename("count").reset_index()
    sparse_counts = pd.concat([own.assign(count=own["count"] + rng.integers(0, 50, len(own))),
                               pd.DataFrame({"origin": [7], "destination": [7], "count": [3]})]).sample(frac=1,
                                                                                                          random_state=5)
    for got, (pairs, counts) in ((pool, (wp, wc)), (T.AttackerPool.from_pairs(bounded), (bounded, None)),
                                 (T.AttackerPool.from_pairs(shuffled, wc), (shuffled, wc)),
                                 (T.AttackerPool.from_pairs(sparse, sparse_counts), (sparse, sparse_counts))):
        for name, want in _pool_by_pandas(pairs, counts).items():
            np.testing.assert_array_equal(getattr(got, name), want, err_msg=name)


@pytest.mark.parametrize("pad", [0, 2100])
def test_pool_refuses_counts_that_disagree(pad):
    """The same messages whether each (origin, destination) gets a slot or, with ``pad`` people on distinct pairs
    (2,101 × 2,101 origins × destinations > 2^22), the pairs are ranked."""
    extra = pd.DataFrame({"user": np.arange(pad) + 10, "origin": np.arange(pad) + 10,
                          "destination": np.arange(pad) + 10})
    pairs = pd.concat([pd.DataFrame({"user": [1, 1, 2], "origin": [0, 0, 0], "destination": [1, 2, 1]}), extra])
    good = pd.concat([pd.DataFrame({"origin": [0, 0, 5], "destination": [1, 2, 5], "count": [2, 1, 9]}),
                      extra.drop(columns="user").assign(count=1)])
    assert (pad == 0) == (pairs["origin"].nunique() * pairs["destination"].nunique() <= 1 << 22)
    assert T.AttackerPool.from_pairs(pairs, good).others[:3].tolist() == [1.0, 0.0, 1.0]
    with pytest.raises(ParameterError, match=r"on 1 pair\(s\), e.g. origin 0, destination 2: no count in counts"):
        T.AttackerPool.from_pairs(pairs, good.iloc[[0, 2, *range(3, 3 + pad)]])
    with pytest.raises(ParameterError, match=r"origin 0, destination 1: count 1 < 2 people"):
        T.AttackerPool.from_pairs(pairs, good.assign(count=[1, 1, 9] + [1] * pad))
    pairs = pairs.iloc[:3]
    with pytest.raises(ParameterError, match="missing value"):
        T.AttackerPool.from_pairs(pairs.assign(user=[1, None, 2]))
    with pytest.raises(ParameterError, match="no rows"):
        T.AttackerPool.from_pairs(pairs.iloc[:0])
    with pytest.raises(ParameterError, match="missing"):
        T.AttackerPool.from_pairs(pairs.drop(columns="origin"))


# ---- dealing ---------------------------------------------------------------------------------------------------

def test_rounds_are_reproducible_and_seeded(pool):
    a, b = T.deal(pool, T.GameRules(), 10, 3, seed=42), T.deal(pool, T.GameRules(), 10, 3, seed=42)
    assert a.user == b.user
    np.testing.assert_array_equal(a.noisy, b.noisy)
    assert a.member == b.member
    c = T.deal(pool, T.GameRules(), 10, 3, seed=43)
    assert not np.array_equal(a.noisy, c.noisy)
    assert a.k == 10
    assert len(set(zip(a.origin, a.destination, strict=True))) == 10     # k distinct pairs of one person
    assert a.shown()["state"].isin(["released", "suppressed"]).all()


def test_rounds_come_from_the_documented_stream(pool):
    """Round j of level k is dealt from default_rng((seed, k, j)): the person, the pairs, the coin, the noise, the
    tie coin, in that order (replayed here without the module's helpers), so a class code keeps its rounds."""
    rules = T.GameRules(0.66, 100)
    for k, j, seed in ((1, 0, 7), (10, 3, 42), (32, 199, 2022)):
        rng = np.random.default_rng((seed, k, j))
        who = np.flatnonzero(np.diff(pool.start) >= k)
        i = int(who[rng.integers(who.size)])
        pick = pool.start[i] + rng.choice(pool.start[i + 1] - pool.start[i], size=k, replace=False)
        member = bool(rng.random() < 0.5)
        noisy = pool.others[pick] + member + rng.laplace(0.0, rules.scale, size=k)
        tie_coin = bool(rng.random() < 0.5)
        r = T.deal(pool, rules, k, j, seed)
        assert (r.user, r.member, r.tie_coin) == (pool.users[i], member, tie_coin)
        np.testing.assert_array_equal(r.origin, pool.origin[pick])
        np.testing.assert_array_equal(r.noisy, noisy)


def test_deal_needs_someone_with_k_trips(pool):
    with pytest.raises(ParameterError, match="nobody in this week has k=500"):
        T.deal(pool, T.GameRules(), 500, 0, 1)


def test_game_noise_is_the_release_noise():
    """The noise of the dealt rounds is Laplace(sensitivity/ε): KS at α = 1e-6, rejecting scales ×0.7 and ×1.3."""
    toy = _toy_pool([[150]] * 5)
    for sens in (1, 4):
        rules = T.GameRules(0.66, 100, sens)
        rounds = [T.deal(toy, rules, 1, j, 5) for j in range(4000)]
        noise = np.array([r.noisy[0] - r.others[0] - r.member for r in rounds])
        assert stats.kstest(noise, stats.laplace(scale=sens / 0.66).cdf).pvalue > ALPHA
        for wrong in (0.7, 1.3):
            assert stats.kstest(noise, stats.laplace(scale=wrong * sens / 0.66).cdf).pvalue < ALPHA
        assert abs(np.mean([r.member for r in rounds]) - 0.5) < 0.05


def test_published_follows_the_release_probability():
    """Near the threshold: how often a pair is published matches release_probability(others + member)."""
    toy = _toy_pool([[97, 99, 101, 103]] * 3)
    rules = T.GameRules(0.66, 100)
    pub, prob = [], []
    for j in range(3000):
        r = T.deal(toy, rules, 4, j, 9)
        pub.extend(r.published.tolist())
        prob.extend(release_probability(r.others + r.member, 0.66, 100).tolist())
    pub, prob = np.array(pub), np.array(prob)
    z = (pub.sum() - prob.sum()) / np.sqrt(np.sum(prob * (1 - prob)))
    assert abs(z) < stats.norm.isf(ALPHA / 2)


# ---- the score against theory (the "done when", engine side) ------------------------------------------

def test_optimal_attacker_scores_the_thresholded_theory_not_the_plain_curve(pool):
    """200 rounds at k = 32 on the bundled city (ε = 0.66, τ = 100): the optimal attacker's wins are inside the
    binomial 99 % interval around the mean exact success of those very rounds (user_risk per round). The
    no-threshold p_32 (95.5 %) is far outside that interval: the game's theory is the thresholded one.

    Wins are a sum of independent Bernoulli(s_j); their variance is at most the binomial one at the mean, so the
    binomial interval is conservative."""
    rules, k, n, seed = T.GameRules(0.66, 100), 32, 200, 2022
    theory = T.expected_success(pool, rules, k, seed, rounds=n)
    wins = sum(T.deal(pool, rules, k, j, seed).optimal_guess == T.deal(pool, rules, k, j, seed).member
               for j in range(n))
    lo, hi = T.binomial_interval(float(theory.mean()), n)
    assert lo <= wins / n <= hi, (wins / n, theory.mean(), lo, hi)
    plain = float(success_curve(0.66, 32)[32])
    assert not (lo <= plain <= hi)
    assert 0.55 < theory.mean() < 0.8
    always_in = sum(T.deal(pool, rules, k, j, seed).member for j in range(n))
    lo5, hi5 = T.binomial_interval(0.5, n)
    assert lo5 <= always_in / n <= hi5


def test_theory_rounds_are_the_dealt_rounds(pool):
    """expected_success draws each round's pairs without dealing the whole round (no coin, no noise) and computes
    each distinct set of counts once: the same values as Round.exact_success on every dealt round."""
    rules, seed = T.GameRules(0.7, 100), 11
    for k in (1, 10):
        got = T.expected_success(pool, rules, k, seed, rounds=40)
        want = np.array([T.deal(pool, rules, k, j, seed).exact_success() for j in range(40)])
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize(("eps", "tau", "sens"), [(0.66, 100, 1), (0.1, 10, 1), (2.0, 300, 1), (0.7, 1, 1),
                                                (1.0, 20, 5)])
def test_batched_round_success_is_user_risk(pool, eps, tau, sens):
    """round_success (all rounds of a level in one batched FFT, silent pairs as a point mass at loss 0) equals
    user_risk(...).success round by round, on the city's rounds at every ladder level and on settings where most
    pairs are silent (τ = 300), most are informative (τ = 1, 10) and per user (sensitivity 5)."""
    from odcore.privacy.attack import user_risk

    rules = T.GameRules(eps, tau, sens)
    for k in T.LADDER:
        others = T.round_others(pool, k, 7, rounds=30)
        want = [user_risk(row, rules.epsilon_pair, tau, resolution=64).success for row in others]
        np.testing.assert_allclose(T.round_success(others, rules), want, rtol=0, atol=1e-12)


def test_batched_round_success_edge_rows():
    """Rows with nothing informative are exactly ½ (as user_risk); never-suppressed pairs (one type) give p_k;
    repeated and mixed rows; a bad table is refused."""
    from odcore.privacy.attack import user_risk

    rules = T.GameRules(0.66, 100)
    rows = np.array([[0, 0, 0], [5000, 5000, 5000], [99, 0, 5000], [0, 5000, 99], [120, 95, 80], [0, 0, 0]], float)
    got = T.round_success(rows, rules)
    assert got[0] == got[5] == 0.5
    assert got[1] == pytest.approx(float(success_curve(0.66, 3)[3]), abs=1e-6)
    assert got[2] == got[3]
    np.testing.assert_allclose(got, [user_risk(r, 0.66, 100, resolution=64).success for r in rows], rtol=0,
                               atol=1e-12)
    for bad in (np.zeros((0, 3)), np.array([1.0, 2.0]), np.array([[1.0, -1.0]]), np.array([[np.nan, 1.0]])):
        with pytest.raises(ParameterError, match="others"):
            T.round_success(bad, rules)


def test_round_others_are_the_dealt_rounds(pool):
    """The theory's pairs are the dealt rounds' pairs, whatever ε, threshold or sensitivity the round is dealt with
    (the app draws them once and reuses them when those change)."""
    others = T.round_others(pool, 10, 5, rounds=25)
    for rules in (T.GameRules(0.66, 100), T.GameRules(0.2, 30, 4)):
        np.testing.assert_array_equal(others, np.stack([T.deal(pool, rules, 10, j, 5).others for j in range(25)]))
    with pytest.raises(ParameterError, match="unique trips"):
        T.round_others(pool, 10_000, 5)


def test_theory_is_the_plain_curve_when_nothing_is_suppressed():
    """Every pair far above the threshold: the per-round exact success is p_k, and the optimal attacker's score
    over 2,000 rounds of k = 3 matches p_3 = 70.7 % within the binomial 99 % interval."""
    toy = _toy_pool([[5000] * 5] * 4)
    rules = T.GameRules(0.66, 100)
    r0 = T.deal(toy, rules, 3, 0, 1)
    p3 = float(success_curve(0.66, 3)[3])
    assert r0.exact_success(256) == pytest.approx(p3, abs=1e-6)
    n = 2000
    wins = 0
    for j in range(n):
        r = T.deal(toy, rules, 3, j, 1)
        wins += r.optimal_guess == r.member
    lo, hi = T.binomial_interval(p3, n)
    assert lo <= wins / n <= hi


def test_game_level_climbs_and_binomial_interval():
    assert [T.game_level(n)[0] for n in (0, 4, 5, 10, 15, 99)] == [1, 1, 3, 10, 32, 32]
    assert T.game_level(12) == (10, 2)
    lo, hi = T.binomial_interval(0.7, 200)
    assert lo < 0.7 < hi
    assert stats.binom.cdf(lo * 200 - 1, 200, 0.7) <= 0.005


# ---- the noise picture -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("c", "sens"), [(120, 1), (95, 1), (100, 1), (103, 1), (130, 10)])
def test_noise_picture_numbers_are_the_release_probability(c, sens):
    pic = T.noise_picture(c, 0.66, 100, sensitivity=sens)
    assert pic.p_published == pytest.approx(float(release_probability(c, 0.66, 100, sens)), abs=1e-15)
    lap = stats.laplace(loc=c, scale=sens / 0.66)
    assert lap.cdf(pic.high) - lap.cdf(pic.low) == pytest.approx(0.95, abs=1e-12)
    lo = max(pic.low, 100)
    assert pic.p_published_in_range == pytest.approx(max(lap.cdf(pic.high) - lap.cdf(lo), 0.0), abs=1e-12)
    assert str(c) in pic.sentence()


def test_noise_sentence_against_simulated_release():
    """Run odcore.privacy.release.release on 20,000 pairs of c = 12 people (τ = 10, ε = 0.66): the share published and the
    share published inside the sentence's range match the sentence's numbers (binomial z at α = 1e-6), and the
    same test rejects the numbers of a wrong noise scale (sensitivity 2)."""
    c, tau, n = 12, 10, 20_000
    pairs = pd.DataFrame({"week": 0, "user": np.arange(n * c),
                          "origin": np.repeat(np.arange(n), c), "destination": -1})
    tab = release(pairs, ReleaseConfig(epsilon=0.66, threshold=tau), rng=3)
    assert (tab["true_count"] == c).all()
    pic = T.noise_picture(c, 0.66, tau)
    pub = tab["released"].to_numpy()
    y = tab["noisy_count"].to_numpy()
    in_range = pub & (y >= pic.low) & (y <= pic.high)
    zcrit = stats.norm.isf(ALPHA / 2)

    def z(k, p):
        return (k - n * p) / np.sqrt(n * p * (1 - p))

    assert abs(z(pub.sum(), pic.p_published)) < zcrit
    assert abs(z(in_range.sum(), pic.p_published_in_range)) < zcrit
    wrong = T.noise_picture(c, 0.66, tau, sensitivity=2)
    assert abs(z(pub.sum(), wrong.p_published)) > zcrit
    assert "published" in pic.sentence()


def test_noise_sentences_read_right():
    assert T.noise_picture(120, 0.66, 100).sentence().startswith("A count of 120 is published in 99.9999 % of weeks, "
                                                                 "as a number between 115.5 and 124.5 in 95 %")
    s95 = T.noise_picture(95, 0.66, 100).sentence()
    assert "1.8 %" in s95       # ½·exp(−0.66·5) = 1.84 %
    assert "suppressed" in T.noise_picture(10, 0.66, 100).sentence()
    with pytest.raises(ParameterError, match="count must be"):
        T.noise_picture(-1, 0.66, 100)


# ---- codes and worksheet ---------------------------------------------------------------------------------------

def test_class_code_round_trip_and_typos():
    for seed, choice, fp in [(0, 0, 0), (2 ** 20 - 1, 4, 1023), (777, 2, 513)]:
        code = T.class_code(seed, choice, fp)
        assert len(code) == 8
        assert code[4] == "-"
        assert T.parse_class_code(code.lower()) == (seed, choice, fp)
    with pytest.raises(ParameterError, match="7 letters or digits"):
        T.parse_class_code("ABC")
    with pytest.raises(ParameterError, match="seed must be <"):
        T.class_code(2 ** 20, 0, 0)
    a = T.settings_fingerprint(0.66, 100, 1, 0, 24948, 549252)
    assert a != T.settings_fingerprint(0.67, 100, 1, 0, 24948, 549252)


def test_worksheet_answers_come_from_the_engine():
    items = T.worksheet_items(0.66, 100, game_theory={32: 0.671}, median_trips=21)
    text = " ".join(a for _, a in items)
    assert "70.7 %" in text        # exact p_3 at ε = 0.66
    assert "95.5 %" in text        # exact p_32
    assert "65.9 %" in text        # e^ε/(1+e^ε)
    assert "21.12" in text         # 32 × 0.66
    html = T.worksheet_html(items, settings="ε = 0.66")
    assert html.startswith("<!doctype html>")
    assert html.count("<li>") == 2 * len(items)
    other = " ".join(a for _, a in T.worksheet_items(1.0, 100))
    assert "70.7 %" not in other
