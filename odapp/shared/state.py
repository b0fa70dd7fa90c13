"""Shared settings: explicit ``st.session_state`` keys, their defaults and the frozen :class:`Settings`.

Every setting has a *persistent* key (``"odlab.epsilon"``) that survives page switches and a *widget* key
(``"w.epsilon"``) owned by the sidebar widget. The sidebar copies persistent -> widget before drawing a widget that
Streamlit dropped (it forgets the state of widgets a page did not draw) and widget -> persistent after, so the
values are kept across pages.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum

from odcore.errors import ParameterError, check_positive
from odcore.privacy.release import Mode, ReleaseConfig


class DataSource(StrEnum):
    """Where the traces come from."""

    SAMPLE = "sample"
    SYNTH = "synth"
    UPLOAD = "upload"
    COUNTS = "counts"


DATA_SOURCE_LABELS = {
    DataSource.SAMPLE: "Bundled synthetic city",
    DataSource.SYNTH: "Synthesise a new city",
    DataSource.UPLOAD: "Upload a file",
    DataSource.COUNTS: "OD counts folder (trips --counts-out)",
}

# ---- persistent keys (the contract between pages) -------------------------------------------------------------
K_SOURCE = "odlab.source"
K_COUNTS_DIR = "odlab.counts_dir"
K_WEEK = "odlab.week"
K_WEEK_FOR = "odlab.week_for"          # (dataset id, zones, tz) the default week was chosen for (the busiest)
K_CELL_KM2 = "odlab.cell_km2"
K_EPSILON = "odlab.epsilon"
K_THRESHOLD = "odlab.threshold"
K_SEED = "odlab.seed"
K_BEFORE = "odlab.settings_before"   # the settings of the session's previous run (odapp.shared.ahead.next_settings)
K_MODE = "odlab.mode"
K_MAX_PAIRS = "odlab.max_pairs"          # contribution bound of the per-user mode
K_FIT_THRESHOLD = "odlab.fit_threshold"  # per-user mode: threshold fitted to the noise (default) or set by hand
K_USER_THRESHOLD = "odlab.user_threshold"  # per-user mode: the threshold set by hand
K_SYNTH_USERS = "odlab.synth_users"
K_SYNTH_WEEKS = "odlab.synth_weeks"
K_SYNTH_EXTENT = "odlab.synth_extent_km"
K_DATASET = "odlab.dataset"            # DatasetRef of the data in use
K_UPLOAD_TRACES = "odlab.upload_traces"  # Traces of the last good upload (kept when a later upload fails)
K_UPLOAD_ERROR = "odlab.upload_error"    # message of the last failed upload, shown until the next good one
K_ZONE_KIND = "odlab.zone_kind"          # "square" | "h3" | "file" (odcore.space.zones)
K_H3_RES = "odlab.h3_res"                # H3 resolution when zone_kind is "h3"
K_ZONE_FILE = "odlab.zone_file"          # path of the zone file in use (bundled districts or a saved upload)
K_ZONE_LABEL = "odlab.zone_label"        # what the zone file is called in the app and in exports
K_ZONE_ERROR = "odlab.zone_error"        # message of the last failed zone upload

# Google / Bassolas et al. 2019 as described in their reply (Nature Communications 2022): ε = 0.66 per metric,
# threshold 100 on the noisy count, ~1.3 km² grid cells.
BASSOLAS_2019 = {K_EPSILON: 0.66, K_THRESHOLD: 100, K_CELL_KM2: 1.3, K_MODE: "per_metric", K_ZONE_KIND: "square"}

DEFAULTS: dict[str, object] = {
    K_SOURCE: DataSource.SAMPLE.value,
    K_WEEK: 0,
    K_CELL_KM2: 1.3,
    K_EPSILON: 0.66,
    K_THRESHOLD: 100,
    K_SEED: 0,
    K_MODE: "per_metric",
    K_MAX_PAIRS: 10,
    K_FIT_THRESHOLD: True,
    K_USER_THRESHOLD: 200,
    K_SYNTH_USERS: 2000,
    K_SYNTH_WEEKS: 2,
    K_SYNTH_EXTENT: 12.0,
    K_ZONE_KIND: "square",
    K_H3_RES: 8,
    K_COUNTS_DIR: "",
}

EPSILON_RANGE = (0.05, 5.0, 0.01)      # min, max, step of the ε slider
THRESHOLD_RANGE = (1, 500, 1)
USER_THRESHOLD_MAX = 100_000
USER_DELTA = 1e-6
"""Per-user mode: a person's δ over :data:`USER_WEEKS` weeks, every part included, is at most this with the fitted
threshold (:func:`odcore.privacy.accounting.delta_parts`)."""
USER_WEEKS = 52
"""Weekly releases the fitted threshold's δ covers (the CLI's ``release`` and ``budget`` ``--weeks`` default)."""
CELL_KM2_RANGE = (0.1, 25.0, 0.1)
SEED_MAX = 2**31 - 1
HEADLINE_DELTA = 1e-6   # δ of the tight per-person figure in every page's headline (odapp.shared.layout.unit_headline)


def widget_key(key: str) -> str:
    """Widget key of a persistent key: ``"odlab.epsilon" -> "w.epsilon"``."""
    return "w." + key.split(".", 1)[1]


def init_state(state) -> None:
    """Put every default into ``state`` (a ``st.session_state`` or a dict) where it is missing."""
    for k, v in DEFAULTS.items():
        if k not in state:
            state[k] = v


def apply_preset(state) -> None:
    """The one-click "Google/Bassolas 2019 setting": sets persistent and widget keys (use as a button callback)."""
    for k, v in BASSOLAS_2019.items():
        state[k] = v
        state[widget_key(k)] = v


def is_bassolas_preset(state) -> bool:
    return all(state.get(k) == v for k, v in BASSOLAS_2019.items())


@dataclass(frozen=True)
class DatasetRef:
    """A small, hashable handle on the data in use (the cache key of everything computed from it).

    ``id`` is content-derived: the sample file's size and mtime, the synthesis parameters and seed, or the
    SHA-256 of an upload plus its reading options.
    """

    id: str
    kind: str
    label: str
    synth_users: int | None = None
    synth_weeks: int | None = None
    synth_extent_km: float | None = None
    synth_seed: int | None = None


@dataclass(frozen=True)
class Settings:
    """What every page reads from the sidebar (frozen, hashable: usable as a cache key)."""

    dataset: DatasetRef
    week: int
    cell_km2: float
    epsilon: float
    threshold: float
    seed: int
    mode: str = "per_metric"
    max_pairs: int = 10
    zones: str | None = None   # odcore.space.zones spec ("h3:8", a zone file path); None = squares of cell_km2
    zones_label: str | None = None   # how the zone system is named on pages and in exports

    def __post_init__(self) -> None:
        check_positive("epsilon", self.epsilon)
        check_positive("cell_km2", self.cell_km2)
        if not self.threshold >= 1:
            raise ParameterError(f"threshold must be >= 1 (a count of users), got threshold={self.threshold!r}.")
        if int(self.max_pairs) != self.max_pairs or self.max_pairs < 1:
            raise ParameterError(f"max_pairs must be an integer >= 1, got max_pairs={self.max_pairs!r}.")
        if int(self.week) != self.week or self.week < 0:
            raise ParameterError(f"week must be an integer >= 0, got week={self.week!r}.")
        if int(self.seed) != self.seed or self.seed < 0:
            raise ParameterError(f"seed must be an integer >= 0, got seed={self.seed!r}.")
        if self.mode not in ("per_metric", "user_level"):
            raise ParameterError(f"mode must be 'per_metric' or 'user_level', got mode={self.mode!r}.")

    def release_config(self):
        """The :class:`odcore.privacy.release.ReleaseConfig` of these settings (``max_pairs`` only in per-user mode)."""
        mode = Mode(self.mode)
        return ReleaseConfig(epsilon=self.epsilon, threshold=self.threshold, mode=mode,
                             max_pairs=self.max_pairs if mode is Mode.USER_LEVEL else None)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["dataset"] = {k: v for k, v in d["dataset"].items() if v is not None}
        return d
