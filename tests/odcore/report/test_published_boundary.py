"""The published boundary as an invariant: two datasets that differ in one person and publish the same table give
byte-identical shareable files (apart from the time they were written), for the command line's release bundle,
the figures command's shareable figures and the app's downloads of the published view.

Post-processing of the published table cannot weaken its guarantee (Dwork & Roth 2014, Prop. 2.1); a file that
also reads the data can. The neighbours are found by search over several seeded cities: a person whose pairs are
all shared with someone else (so no pair disappears and the noise draws stay aligned) and all below the threshold
(so no published count moves); the published tables are then compared byte for byte before anything else is.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from odcore.cli import main
from odcore.data.synth import SynthConfig, generate_city
from odcore.od.engines import build_od
from odcore.od.trips import ODConfig
from odcore.privacy.release import ReleaseConfig, published_table, release_with_report
from odcore.report import figures

# one kaleido Chromium for the module's images (tests/conftest.py: image_server)
pytestmark = pytest.mark.usefixtures("image_server")

EPSILON, THRESHOLD, SEED, MAX_PAIRS = 1.0, 6, 5, 3
TAU_EMPTY = 500   # no count of a 250-person city reaches it (noise scale 1)
CITY_SEEDS = (3, 8, 21)
WRITTEN = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")   # the time written: the one allowed difference


def _config(mode: str) -> ReleaseConfig:
    return ReleaseConfig(epsilon=EPSILON, threshold=THRESHOLD, mode=mode,
                         max_pairs=MAX_PAIRS if mode == "user_level" else None)


def _published(df: pd.DataFrame, mode: str):
    od = build_od(df, ODConfig(tz="America/New_York"))
    res = release_with_report(od.pairs, _config(mode), rng=SEED)
    return published_table(res.table, od.centroids(), od.week_starts), od, res.table


def neighbours(city_seed: int, mode: str):
    """A seeded city and the same city without one person, with the same published table under ``mode``, and the
    person left out (None if no person of the city qualifies)."""
    df = generate_city(SynthConfig(users=250, weeks=1), city_seed)
    pub, od, table = _published(df, mode)
    assert len(pub) > 0, "the test city publishes nothing: lower THRESHOLD"
    pairs = od.pairs
    counts = table.set_index(["week", "origin", "destination"])
    rng = np.random.default_rng(city_seed)
    for user in rng.permutation(pairs["user"].unique())[:80]:
        mine = pairs.loc[pairs["user"] == user, ["week", "origin", "destination"]].drop_duplicates()
        rows = counts.loc[pd.MultiIndex.from_frame(mine)]
        if len(mine) == 0 or (rows["true_count"] == 1).any() \
                or rows["released"].any():
            continue   # a pair of theirs alone (the draws would shift) or published (its count would move)
        other = df.loc[df["user"] != user].reset_index(drop=True)
        if _published(other, mode)[0].equals(pub):
            return df, other, user
    return None


def empty_neighbours(city_seed: int):
    """The issue's pair of worlds: at a threshold no count reaches (nothing published in either), a city and the
    same city without a person who is alone in starting trips from some zone (so a file drawn from the true data,
    such as a map of every zone with an observed trip, tells the worlds apart)."""
    df = generate_city(SynthConfig(users=250, weeks=1), city_seed)
    od = build_od(df, ODConfig(tz="America/New_York"))
    p = od.pairs
    alone = p.groupby("origin")["user"].nunique()
    cells = alone.index[alone.to_numpy() == 1]
    user = p.loc[p["origin"].isin(cells), "user"].iloc[0]
    return df, df.loc[df["user"] != user].reset_index(drop=True), user


_WORLDS: dict = {}


def worlds(mode: str, root: Path):
    """Per city seed: the two datasets written as files, and the person left out (found once per mode)."""
    if mode not in _WORLDS:
        out = []
        for s in CITY_SEEDS:
            found = empty_neighbours(s) if mode == "empty" else neighbours(s, mode)
            if found is None:
                continue
            d, d2, user = found
            a, b = root / f"city{s}_{mode}_all.parquet", root / f"city{s}_{mode}_without_one.parquet"
            d.to_parquet(a, index=False)
            d2.to_parquet(b, index=False)
            out.append((s, a, b, d, d2, user))
        assert len(out) >= 2, f"fewer than two cities with a qualifying person ({mode})"
        _WORLDS[mode] = out
    return _WORLDS[mode]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("worlds")


def _same_bytes(a: bytes, b: bytes, what: str) -> None:
    a, b = WRITTEN.sub(b"<written>", a), WRITTEN.sub(b"<written>", b)
    if a != b:
        i = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        pytest.fail(f"{what}: the two neighbouring datasets give different bytes from byte {i}:\n"
                    f"  {a[max(0, i - 100):i + 60]!r}\n  {b[max(0, i - 100):i + 60]!r}")


def _compare_folders(fa: Path, fb: Path, label: str) -> list[str]:
    names = sorted(p.name for p in fa.iterdir())
    assert names == sorted(p.name for p in fb.iterdir())
    shared = [n for n in names if not n.startswith("DO_NOT_SHARE")]
    for n in shared:
        _same_bytes((fa / n).read_bytes(), (fb / n).read_bytes(), f"{label} {n}")
    return shared


# The first kind of neighbours is searched per count only: under per-person bounding nearly every person keeps a pair
# they alone keep (its count would vanish and shift the noise draws), so the per-person release is checked on the
# second kind (nothing published).
@pytest.mark.parametrize("mode", ["per_metric", "empty"])
def test_the_published_tables_of_the_neighbours_are_equal_and_the_data_differs(root, mode):
    for _, _, _, d, d2, user in worlds(mode, root):
        assert len(d) > len(d2)
        assert d2["user"].nunique() == d["user"].nunique() - 1
        assert user not in set(d2["user"])


@pytest.mark.parametrize(("mode", "unit"), [("per_metric", "per_metric"), ("empty", "per_metric"),
                                            ("empty", "user_level")])
def test_release_bundle_is_the_same_for_neighbours(root, tmp_path, capsys, mode, unit):
    """Both kinds of neighbours: a person on no published pair, and (nothing published) a person alone in a
    zone, the latter per count and per person (bounded to MAX_PAIRS pairs a week)."""
    tau = TAU_EMPTY if mode == "empty" else THRESHOLD
    per_person = ["--mode", "user_level", "--max-pairs", str(MAX_PAIRS)] if unit == "user_level" else []
    for s, a, b, *_ in worlds(mode, root)[:2]:
        outs = []
        for tag, path in (("a", a), ("b", b)):
            out = tmp_path / f"{s}{mode}{tag}"
            assert main(["release", "--input", str(path), "--epsilon", str(EPSILON), "--threshold", str(tau),
                         *per_person, "--seed", str(SEED), "--tz", "America/New_York", "--out", str(out),
                         "--analysis-out", str(tmp_path / f"an{s}{mode}{tag}")]) == 0
            outs.append(out)
        shared = _compare_folders(*outs, f"release {mode} city {s}")
        assert shared == sorted(["guarantee_sheet.html", "published.csv", "published.parquet", "release.json",
                                 "zones.geojson"])
        # the private records do tell the worlds apart: what they hold is not in the shared files
        ra = (tmp_path / f"an{s}{mode}a" / "DO_NOT_SHARE_record.json").read_text()
        rb = (tmp_path / f"an{s}{mode}b" / "DO_NOT_SHARE_record.json").read_text()
        assert ra != rb
    capsys.readouterr()


def _ctx(df: pd.DataFrame, label: str, tau: float):
    from odapp.data.loading import Loaded
    from odapp.shared.state import DatasetRef, Settings

    od = build_od(df, ODConfig(tz="America/New_York"))
    s = Settings(dataset=DatasetRef(id=f"test:{label}", kind="upload", label=f"Upload: {label}.parquet"),
                 week=_busiest_week(df), cell_km2=1.3, epsilon=EPSILON, threshold=tau, seed=SEED)
    return SimpleNamespace(settings=s, loaded=Loaded(df=df, summary={}), od=od, od_config=ODConfig(tz="America/New_York"))


@pytest.mark.parametrize("mode", ["per_metric", "empty"])
def test_app_published_view_downloads_are_the_same_for_neighbours(root, mode):
    """What the OD release and Privacy budget pages hand out as shareable: the published table (CSV), the
    guarantee sheet and release.json, through the functions the pages call."""
    from odapp.release import view as rv
    from odcore.privacy.accounting import BudgetConfig, budget, delta_parts
    from odcore.report.safe_csv import csv_text

    tau = TAU_EMPTY if mode == "empty" else THRESHOLD
    for s, _, _, d, d2, _ in worlds(mode, root):
        files = []
        for df, label in ((d, "all"), (d2, "without_one")):
            ctx = _ctx(df, label, tau)
            rcfg = ctx.settings.release_config()
            wk = ctx.settings.week
            parts = delta_parts(EPSILON, 1e-6, 52, threshold=tau, trips=21)
            b = budget(BudgetConfig(epsilon=EPSILON, threshold=tau, trips=21, weeks=52, delta=parts.laplace,
                                    total_interval=0))
            files.append({"published.csv": csv_text(rv.published_csv(ctx, rcfg, wk)).encode(),
                          "guarantee_sheet.html": rv.budget_sheet_html(ctx, b, parts.to_dict()).encode(),
                          "release.json": rv.release_json(ctx, rcfg, wk).encode()})
        for name in files[0]:
            _same_bytes(files[0][name], files[1][name], f"app download {name}, city {s}")


def _busiest_week(df: pd.DataFrame) -> int:
    """The week with the most trips (the synthetic week starts on a Monday in New York: in UTC a few of its fixes
    fall in the week before)."""
    return int(build_od(df, ODConfig(tz="America/New_York")).pairs["week"].value_counts().idxmax())


def _needs_browser():
    if figures.find_browser() is None:
        pytest.skip("no Chromium: figures cannot be drawn")


SHAREABLE_FIGURES = "fig1_per_count,fig1_per_person,budget_weeks,flow_map"


@pytest.mark.slow
@pytest.mark.browser
def test_figures_are_the_same_for_neighbours_apart_from_map_images(root, tmp_path, capsys):
    """Every shareable file of ``figures`` (settings-only figures, the flow map's published flows and config),
    the map's images aside (:func:`test_map_images_are_the_same_for_neighbours`)."""
    _needs_browser()
    s, a, b, d, *_ = worlds("per_metric", root)[0]
    outs = []
    for tag, path in (("a", a), ("b", b)):
        out = tmp_path / f"fig{tag}"
        assert main(["figures", "--out", str(out), "--only", SHAREABLE_FIGURES + ",release_probability",
                     "--formats", "svg", "--input", str(path), "--tz", "America/New_York", "--epsilon", str(EPSILON),
                     "--threshold", str(THRESHOLD), "--seed", str(SEED), "--week", str(_busiest_week(d))]) == 0
        outs.append(out)
    fa, fb = outs
    names = sorted(p.name for p in fa.iterdir())
    assert "DO_NOT_SHARE_release_probability.svg" in names   # drawn from the true counts: named so
    for n in names:
        if n.startswith("DO_NOT_SHARE") or (n.startswith("flow_map.") and not n.endswith((".csv", ".json"))):
            continue
        _same_bytes((fa / n).read_bytes(), (fb / n).read_bytes(), f"figures {n}, city {s}")
    capsys.readouterr()


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("mode", ["per_metric", "empty"])
def test_map_images_are_the_same_for_neighbours(root, tmp_path, capsys, mode):
    """The published view's map images: ``release --map`` and ``figures``' flow map, drawn by the builders the
    commands use. An image shaded or drawn from true counts (zones of suppressed pairs, a zone where one person
    alone starts trips) tells the worlds apart."""
    _needs_browser()
    tau = TAU_EMPTY if mode == "empty" else THRESHOLD
    s, a, b, d, *_ = worlds(mode, root)[0]
    wk = str(_busiest_week(d))
    images = []
    for tag, path in (("a", a), ("b", b)):
        out = tmp_path / f"fig{tag}"
        assert main(["figures", "--out", str(out), "--only", "flow_map", "--formats", "svg", "--input", str(path),
                     "--tz", "America/New_York", "--epsilon", str(EPSILON), "--threshold", str(tau),
                     "--seed", str(SEED), "--week", wk]) == 0
        m = tmp_path / f"map{tag}.svg"
        assert main(["release", "--input", str(path), "--epsilon", str(EPSILON), "--threshold", str(tau),
                     "--seed", str(SEED), "--tz", "America/New_York", "--out", str(tmp_path / f"rel{tag}"),
                     "--week", wk, "--map", str(m)]) == 0
        images.append({"figures flow_map.svg": (out / "flow_map.svg").read_bytes(),
                       "release --map": m.read_bytes()})
    for name in images[0]:
        _same_bytes(images[0][name], images[1][name], f"{name}, city {s}")
    capsys.readouterr()
