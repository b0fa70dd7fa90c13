"""What a page computes from its context, in one function the page itself calls and :func:`odapp.shared.ahead.after`
calls for the next grid step or seed: same function, same arguments, same cache entries. They live here, not in the
pages: a function defined in a page script would keep that page's whole namespace alive while a job holds it
(docs/architecture.md). Each takes the page context ``ctx`` (:class:`odapp.shared.sidebar.PageContext`) first and small
arguments after (the page's own widgets' values), and reads nothing else: no session state, since it may run in the
background thread of :mod:`odapp.shared.ahead`."""

from __future__ import annotations

from odapp.audit import cache as audit_cache
from odapp.data import cache as data_cache
from odapp.designer import cache as designer_cache
from odapp.game import cache as game_cache
from odapp.knock import cache as knock_cache
from odapp.shared import callbacks
from odcore.knock import MREConfig


def data_summary_and_map(ctx):
    """The Data page: ``(od summary, trace-density map)``; the map is None for an OD counts folder (no traces)."""
    s, od = ctx.settings, ctx.od
    summary = data_cache.od_summary(s.dataset.id, ctx.od_config, int(s.threshold), _od=od)
    if not od.stats.get("pairs_available", True):
        return summary, None
    return summary, data_cache.trace_density_map(s.dataset.id, ctx.od_config,
                                            _df=None if "cell_points" in od.stats else ctx.loaded.df,
                                            _grid=od.grid, _od=od)


def design(ctx, goal, max_pairs, tune: bool):
    """The Release designer: ``(design report, its key, frontier chart)``: the key (the arguments of
    ``designer_cache.design_report``) names the report for the chart's files, made on a click
    (:func:`odapp.designer.cache.frontier_figure`)."""
    s = ctx.settings
    report = designer_cache.design_report(s.dataset.id, ctx.od_config, s.week, goal, max_pairs, s.seed, _od=ctx.od,
                                 tune=bool(tune))
    key = (s.dataset.id, ctx.od_config, s.week, goal, max_pairs, s.seed, tune)
    return report, key, designer_cache.frontier_chart(key, _rep=report)


def frontier_figure(key: tuple, report: dict):
    """The designer's frontier as a plotly figure, for its PNG and SVG files (:func:`odapp.designer.cache.frontier_figure`,
    laid out for a screen: the files are offered outside projector mode only)."""
    return designer_cache.frontier_figure(key, False, _rep=report)[0]


def game_theory(ctx, ladder, game_seed: int, rounds: int) -> dict:
    """Play the attacker: the optimal attacker's mean exact success over ``rounds`` rounds at each level of the
    ladder with eligible people, ``{k: success}`` in increasing k."""
    s = ctx.settings
    pool = callbacks.game_pool(ctx)[0]
    return {kk: float(game_cache.game_theory(s.dataset.id, ctx.od_config, s.week, s.release_config(), s.seed, game_seed,
                                        kk, rounds, _pool=pool).mean())
            for kk in sorted(set(ladder)) if pool.eligible(kk).size}


def knock_mre(ctx, ts_config, m: int) -> dict:
    """Knock Knock: the defences' MRE table (:func:`odapp.knock.cache.knock_mre`) for groups of ``m`` people, 20 groups
    drawn with the sidebar's seed."""
    s = ctx.settings
    ts = knock_cache.knock_series(s.dataset.id, ts_config, _df=ctx.loaded.df)
    return knock_cache.knock_mre(s.dataset.id, ts_config, MREConfig(m=min(int(m), ts.n_users - 1), n_groups=20,
                                                                seed=int(s.seed)), _ts=ts)


def selection(ctx, epsilon: float, delta: float, max_pairs: int):
    """Audit: the partition-selection strategies' table at a guarantee per person and week."""
    s = ctx.settings
    return audit_cache.selection_table(s.dataset.id, ctx.od_config, s.week, float(epsilon), delta, int(max_pairs),
                                 int(s.seed), _od=ctx.od)
