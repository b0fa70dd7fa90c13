"""Play the attacker's cached computations: the week's pool of people, the game's rounds and the optimal attacker's
exact success on them."""

from __future__ import annotations

from odapp.attack.cache import attack_pairs, pairs_key
from odapp.shared.caching import cache_data, cache_resource
from odcore.report.teaching import AttackerPool, GameRules, round_others, round_success


def attacker_pool(dataset_id: str, od_config, week: int, release_config, seed: int, _od):
    """:class:`odcore.report.teaching.AttackerPool` of the week, for the release's mode (bounded pairs per user); built
    once per data, week and :func:`pairs_key` (an ε, threshold or, per metric, seed change reuses it)."""
    return _attacker_pool(dataset_id, od_config, week, pairs_key(release_config, seed), _release_config=release_config,
                          _seed=seed, _od=_od)


@cache_resource(max_entries=8, show_spinner="Listing the week's people and their trips…")
def _attacker_pool(dataset_id: str, od_config, week: int, pool_key: tuple, _release_config, _seed: int, _od):
    pairs, counts = attack_pairs(dataset_id, od_config, week, _release_config, _seed, _od=_od)
    return AttackerPool.from_pairs(pairs, counts)


def game_theory(dataset_id: str, od_config, week: int, release_config, seed: int, game_seed: int, k: int,
                rounds: int, _pool):
    """Exact success of the optimal attacker on each of the first ``rounds`` rounds of level ``k``
    (:func:`odcore.report.teaching.expected_success`). The rounds' pairs are drawn once per pool, game seed and k; an ε or
    threshold change only recomputes the successes (:func:`odcore.report.teaching.round_success`, batched)."""
    pool_key = pairs_key(release_config, seed)
    others = _round_others(dataset_id, od_config, week, pool_key, game_seed, k, rounds, _pool=_pool)
    return _round_success(dataset_id, od_config, week, pool_key, game_seed, k, rounds, release_config.epsilon,
                          release_config.threshold, release_config.sensitivity, _others=others)


@cache_resource(max_entries=32, show_spinner="Dealing the game's rounds…")
def _round_others(dataset_id: str, od_config, week: int, pool_key: tuple, game_seed: int, k: int, rounds: int,
                  _pool):
    out = round_others(_pool, k, game_seed, rounds)
    out.setflags(write=False)
    return out


@cache_data(max_entries=64, show_spinner="Computing the optimal attacker's exact success on the game's rounds…")
def _round_success(dataset_id: str, od_config, week: int, pool_key: tuple, game_seed: int, k: int, rounds: int,
                   epsilon: float, threshold: float, sensitivity: int, _others):
    return round_success(_others, GameRules(epsilon, threshold, sensitivity))
