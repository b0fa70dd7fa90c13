"""The Audit page's cached computations: the one-run audit and the partition-selection comparison."""

from __future__ import annotations

from odapp.data.cache import week_pairs_prepared
from odapp.shared.caching import cache_data
from odcore.privacy.audit import AuditConfig, audit_one_run
from odcore.privacy.selection import compare_selection


@cache_data(max_entries=16, show_spinner="Auditing the release: canaries in, one release, guesses…")
def audit(dataset_id: str, od_config, week: int, epsilon: float, threshold: float, unit: str, placement: str,
          canaries: int, seed: int, _od) -> dict:
    """:func:`odcore.privacy.audit.audit_one_run` of one week (cached per data, zones, week and settings)."""
    cfg = AuditConfig(epsilon=epsilon, threshold=threshold, unit=unit, placement=placement, canaries=canaries)
    return audit_one_run(_od.week_pairs(week), cfg, week=week, rng=seed).to_dict()


@cache_data(max_entries=16, show_spinner="Comparing partition selection strategies…")
def selection_table(dataset_id: str, od_config, week: int, epsilon: float, delta: float, max_pairs: int, seed: int,
                    _od):
    """:func:`odcore.privacy.selection.compare_selection` of one week, without PipelineDP (a test dependency), from
    the week's pairs prepared once (:func:`week_pairs_prepared`, shared with the releases): a new seed only ranks
    the rows by the hash of its key."""
    return compare_selection(week_pairs_prepared(dataset_id, od_config, week, _od=_od), epsilon=epsilon, delta=delta,
                             max_pairs=max_pairs, week=week, rng=seed, pipeline_dp=False)
