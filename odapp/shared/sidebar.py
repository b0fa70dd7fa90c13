"""The shared settings in the sidebar of every page (values kept across pages under explicit keys).

``render()`` draws the controls, loads the data in use (cached on its id) and returns a :class:`PageContext`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import streamlit as st

from odapp.data import cache as data_cache
from odapp.data.loading import Loaded, StreamedLoaded, grid_check
from odapp.data.source import current_dataset, name_session_files, place_caption, source_controls
from odapp.data.zones_ui import data_box, zone_controls, zone_spec
from odapp.shared import ahead, export, guide, projector
from odapp.shared.errors import engine_errors
from odapp.shared.persist import bound
from odapp.shared.state import (
    EPSILON_RANGE,
    K_BEFORE,
    K_CELL_KM2,
    K_DATASET,
    K_EPSILON,
    K_FIT_THRESHOLD,
    K_MAX_PAIRS,
    K_MODE,
    K_SEED,
    K_SOURCE,
    K_THRESHOLD,
    K_UPLOAD_ERROR,
    K_USER_THRESHOLD,
    K_WEEK,
    K_WEEK_FOR,
    SEED_MAX,
    THRESHOLD_RANGE,
    USER_DELTA,
    USER_THRESHOLD_MAX,
    USER_WEEKS,
    DataSource,
    Settings,
    apply_preset,
    init_state,
    is_bassolas_preset,
    widget_key,
)
from odapp.shared.words import epsilon_label, plain, sci
from odcore.od.trips import ODConfig
from odcore.privacy.accounting import delta_parts

MODE_LABELS = {"per_metric": "per metric (as Google did)", "user_level": "per user (bounded contribution)"}
MODE_LABELS_PROJECTOR = {"per_metric": "per metric (Google's)", "user_level": "per user (bounded)"}


"""The same choices in projector mode, short enough for the sidebar's select box at a projector's large type (a
select box shows its choice on one line; the longer words were cut, "per user (bounded co")."""


def week_label(w: int, *, starts, short: bool = False) -> str:
    """A week's choice: "Week 3 (from Mon 2024-01-29)", in projector mode "Week 3, 2024-01-29" (its Monday)."""
    if w >= len(starts):
        return f"Week {w}"
    return f"Week {w}, {starts[w]}" if short else f"Week {w} (from Mon {starts[w]})"


@dataclass(frozen=True)
class PageContext:
    """What a page needs: the frozen settings, the loaded traces and their weekly OD data."""

    settings: Settings
    loaded: Loaded
    od: object   # odcore.od.oddata.ODData
    od_config: object  # odcore.od.oddata.ODConfig
    next: Settings | None = None   # the person's likely next setting (:func:`odapp.shared.ahead.next_settings`)
    tour: object = None   # the sidebar's first slot, where the guided tour's step goes (:func:`odapp.shared.guide.panel`)


def _user_threshold() -> float:
    """Per-user mode: the threshold fitted to the noise (proposed by default) or set by hand, and its δ, by the one
    rule of the CLI's ``release`` and ``budget`` (:func:`odcore.privacy.accounting.delta_parts`: the person's δ over
    :data:`USER_WEEKS` weeks is at most :data:`USER_DELTA`, half for the Laplace part, half for the threshold)."""
    ss = st.session_state
    eps, m = float(ss[K_EPSILON]), int(ss[K_MAX_PAIRS])
    fitted = int(delta_parts(eps, USER_DELTA, USER_WEEKS, max_pairs=m).threshold)
    bound(K_FIT_THRESHOLD, st.toggle, label=f"Fit the threshold to the noise (δ ≤ {sci(USER_DELTA, '.0e')})",
           help=f"Propose the smallest threshold whose share of δ (Google's LaplacePartitionSelection: the chance "
                f"that a pair only one person makes is published, over {USER_WEEKS} weekly releases) is at most "
                f"half of {USER_DELTA:.0e}, as `python -m odcore release` and `budget` do. Switch off to set it by "
                "hand.")
    if ss[K_FIT_THRESHOLD]:
        tau = float(fitted)
        st.markdown(f"Threshold: **{fitted:,}** (fitted to noise {m}/ε)")
    else:
        bound(K_USER_THRESHOLD, st.number_input, label="Threshold (suppress noisy counts below)", min_value=1,
               max_value=USER_THRESHOLD_MAX, step=10,
               help=f"Pairs whose noisy count is below this are not published; {fitted:,} would keep δ ≤ "
                    f"{USER_DELTA:.0e} over {USER_WEEKS} weeks.")
        tau = float(ss[K_USER_THRESHOLD])
    parts = delta_parts(eps, USER_DELTA, USER_WEEKS, max_pairs=m, threshold=tau)
    text = (f"δ over {USER_WEEKS} weeks: **{sci(parts.total, '.2g')}** = {sci(parts.laplace, '.2g')} (Laplace) + "
            f"{sci(parts.threshold_cost, '.2g')} (threshold)")
    if parts.warnings():
        st.warning(f"{text} — " + " ".join(parts.warnings()))
    else:
        st.caption(text)
    return tau


def render(live: tuple[str, ...] = ()) -> PageContext:
    """Draw the shared sidebar; load the data; return the frozen settings and data for the page.

    ``live``: the settings ("epsilon", "threshold") whose slider the page draws itself, beside its live curves
    (:mod:`odapp.components.live`); the sidebar then says where it is instead of drawing a second one."""
    ss = st.session_state
    init_state(ss)
    name_session_files(ss)
    # above the settings: the tour's step beside the page's picture, not above it; a slot its box takes the place of
    # (a container would wrap that box in a block of its own: one more message on every rerun)
    tour = st.sidebar.empty()
    with st.sidebar:
        st.header("Settings")
        st.button("Google/Bassolas 2019 setting", on_click=apply_preset, args=(ss,), type="primary", key="preset",
                  width="stretch",
                  help="ε = 0.66 per metric, noisy counts below 100 removed, ~1.3 km² grid cells: the release "
                       "Google shared with Bassolas et al. (their reply, Nature Communications 2022).")
        if is_bassolas_preset(ss):
            st.caption("✓ Google/Bassolas 2019 setting")
        source_controls()
        with engine_errors("Could not load the data",
                           "Pick the bundled synthetic city or fix the file, then try again."):
            ref, loaded = current_dataset()
        box = data_box(loaded.summary)
        zone_controls(ss, bound, box)
        zones, zones_label = zone_spec(ss, box)
        with engine_errors("Could not load the data",
                           "Pick the bundled synthetic city or fix the file, then try again."):
            if ref.kind == DataSource.COUNTS:   # the folder fixes zones and weeks
                od = data_cache.counts_folder(ref.id, loaded.cli["input"])
                od_config = od.config
                grid_warning = None
                st.caption(f"Zones and weeks come from the counts folder ({plain(od.grid.to_dict().get('spec', ''))}); "
                           "the zone controls above do not apply.")
            else:
                od_config = ODConfig(cell_km2=float(ss[K_CELL_KM2]), tz=loaded.tz, zones=zones)
                grid_warning = grid_check(loaded, od_config.cell_km2) if zones is None else None
                if isinstance(loaded, StreamedLoaded):
                    od = data_cache.streamed_od(ref.id, od_config, loaded.cabs, _summary=loaded.summary)
                else:
                    od = data_cache.od_data(ref.id, od_config, _df=loaded.df)
        ss[K_DATASET] = ref
        n_weeks = max(1, len(od.week_starts))
        busiest, people = od.busiest_week()
        chosen_for = (ref.id, od_config.zones, od_config.tz)
        if ss.get(K_WEEK_FOR) != chosen_for:     # new data: start on its busiest week, never an empty one
            ss[K_WEEK_FOR] = chosen_for
            ss[K_WEEK] = busiest
            ss[widget_key(K_WEEK)] = busiest
        if ss[K_WEEK] >= n_weeks:
            ss[K_WEEK] = n_weeks - 1
            ss[widget_key(K_WEEK)] = n_weeks - 1
        bound(K_WEEK, st.selectbox, label="Week", options=list(range(n_weeks)),
               format_func=functools.partial(week_label, starts=od.week_starts, short=projector.on()),
               help="Which Monday-to-Sunday week is released (each week is a separate release). New data "
                    "opens on its busiest week: the one with most people who make at least one trip.")
        if n_weeks > 1 and people:
            st.caption(f"Week {busiest} is the busiest: {people:,} people with at least one trip"
                       + (" (shown by default)." if int(ss[K_WEEK]) == busiest else "."))
        place_caption(loaded.summary)
        user_mode = ss[K_MODE] == "user_level"
        if "epsilon" in live:
            st.markdown(f"{epsilon_label(ss[K_MODE])}: **{float(ss[K_EPSILON]):g}** — drag it on the page, above "
                        "the curves.")
        else:
            bound(K_EPSILON, st.slider, label=epsilon_label(ss[K_MODE]), min_value=EPSILON_RANGE[0],
                   max_value=EPSILON_RANGE[1], step=EPSILON_RANGE[2],
                   help="Per person and week: the whole week of one person is protected at this ε (each count gets "
                        "noise max_pairs/ε). Per count: Laplace noise of scale 1/ε on every count, protecting one trip "
                        "of one person; Google used 0.66." if user_mode else
                        "Laplace noise of scale 1/ε is added to every count. Smaller ε: more noise, stronger "
                        "protection. Google used 0.66.")
        bound(K_MODE, st.selectbox, label="Guarantee unit", options=list(MODE_LABELS),
               format_func=(MODE_LABELS_PROJECTOR if projector.on() else MODE_LABELS).get,
               help="'per metric' protects one trip of one user in one week (Google's reading); 'per user' "
                    "bounds each user's whole contribution so the guarantee covers a person.")
        if ss[K_MODE] == "user_level":
            bound(K_MAX_PAIRS, st.number_input, label="Max pairs per user and week", min_value=1,
                   max_value=200, step=1,
                   help="Each user keeps at most this many of their unique pairs per week; the noise scale "
                        "becomes max_pairs/ε so the whole week is ε-DP per user.")
            threshold = _user_threshold()
        elif "threshold" in live:
            st.markdown(f"Threshold (suppress noisy counts below): **{float(ss[K_THRESHOLD]):g}** — drag it on the "
                        "page, above the curves.")
            threshold = float(ss[K_THRESHOLD])
        else:
            bound(K_THRESHOLD, st.slider, label="Threshold (suppress noisy counts below)",
                   min_value=THRESHOLD_RANGE[0], max_value=THRESHOLD_RANGE[1], step=THRESHOLD_RANGE[2],
                   help="Pairs whose noisy count is below this are not published. Google used 100.")
            threshold = float(ss[K_THRESHOLD])
        bound(K_SEED, st.number_input, label="Seed", min_value=0, max_value=SEED_MAX, step=1,
               help="Seed of every random draw (noise, synthesis, Monte Carlo): same seed, same numbers.")
        st.caption(f"Data: {plain(ref.label)}")
        projector.toggle()
        export.size_choice()
        guide.reopen_button()
    # In the main area too: the sidebar's messages are below the fold.
    if ss[K_SOURCE] == DataSource.UPLOAD and ss.get(K_UPLOAD_ERROR):
        st.error(plain(ss[K_UPLOAD_ERROR]), icon="⚠️")
    if grid_warning:
        st.warning(f"Very large grid: {grid_warning}", icon="⚠️")
    projector.apply()
    settings = Settings(dataset=ref, week=int(ss[K_WEEK]), cell_km2=float(ss[K_CELL_KM2]),
                        epsilon=float(ss[K_EPSILON]), threshold=threshold, seed=int(ss[K_SEED]),
                        mode=str(ss[K_MODE]), max_pairs=int(ss[K_MAX_PAIRS]), zones=zones,
                        zones_label=zones_label)
    nxt = ahead.next_settings(ss.get(K_BEFORE), settings)
    ss[K_BEFORE] = settings
    if nxt is not None and nxt.cell_km2 != settings.cell_km2 and not ahead.grid_ahead(
            loaded, counts=ref.kind == DataSource.COUNTS):
        nxt = None
    ctx = PageContext(settings=settings, loaded=loaded, od=od, od_config=od_config, next=nxt, tour=tour)
    ahead.after(ctx)   # at least the next grid's tables; a page with heavier work asks again with it
    return ctx
