"""AppTest: an OD counts folder (``trips --counts-out DIR``) as the dashboard's data source.

The release and budget pages work from the counts; the pages that need each person's pairs or traces say so.
"""

from __future__ import annotations

import pytest

from odapp.shared.state import K_COUNTS_DIR, K_SOURCE, DataSource
from odcore.cli import main
from odcore.paths import REPO_ROOT

pytestmark = pytest.mark.timeout(900)
SAMPLE = REPO_ROOT / "sample_data" / "synthetic_city.parquet"


@pytest.fixture(scope="module")
def at(tmp_path_factory):
    from streamlit.testing.v1 import AppTest

    folder = tmp_path_factory.mktemp("od") / "counts"
    assert main(["trips", "--input", str(SAMPLE), "--engine", "duckdb", "--counts-out", str(folder)]) == 0
    app = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=120)
    app.session_state[K_SOURCE] = DataSource.COUNTS.value
    app.session_state[K_COUNTS_DIR] = str(folder)
    app.run()
    assert not app.exception, [e.message for e in app.exception]
    return app


def test_release_and_budget_pages_work_from_counts(at):
    at.switch_page("pages/2_OD_release.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert any("published" in m.label.lower() or "pairs" in m.label.lower() for m in at.metric)
    at.switch_page("pages/4_Privacy_budget.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]


@pytest.mark.parametrize("page", ["pages/1_Data.py", "pages/3_Attack.py", "pages/5_Knock_Knock.py",
                                  "pages/6_Release_designer.py", "pages/7_Play_the_attacker.py"])
def test_pages_needing_pairs_say_why(at, page):
    at.switch_page(page).run()
    assert not at.exception, [e.message for e in at.exception]
    text = " ".join(i.value for i in at.info)
    assert "counts folder" in text


def test_no_folder_yet_keeps_the_bundled_city():
    """Picking the counts folder before typing its path leaves the pages on the bundled city and says so, as an
    upload does before its file is loaded; a path that is not a counts folder is an error naming it."""
    from streamlit.testing.v1 import AppTest

    app = AppTest.from_file(str(REPO_ROOT / "pages" / "2_OD_release.py"), default_timeout=120)
    app.session_state[K_SOURCE] = DataSource.COUNTS.value
    app.run()
    assert not app.exception, [e.message for e in app.exception]
    assert not app.error, [e.value for e in app.error]
    assert any("No folder given yet" in i.value for i in app.sidebar.info)
    assert any(c.value == "Data: Bundled synthetic city" for c in app.sidebar.caption)
    assert any("published" in m.label.lower() for m in app.metric)
    app.session_state[K_COUNTS_DIR] = str(REPO_ROOT / "sample_data")
    app.run()
    assert not app.exception, [e.message for e in app.exception]
    assert any("is not an OD counts folder" in e.value for e in app.error)


@pytest.mark.slow
def test_a_million_user_counts_folder_opens_and_releases(tmp_path):
    """The issue's check at scale: a 1 M-user counts folder (DuckDB engine, streamed) opens in the dashboard and the
    release and budget pages work. Needs the benchmark's city (``python -m benchmarks -k scale`` writes it)."""
    import json
    import os
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    city = Path(os.environ.get("ODCORE_BENCH_DATA", "/tmp/odcore-bench")) / "city_1000000u_1w"
    if not (city / ".complete").is_file():
        pytest.skip(f"{city} not generated (python -m odcore synth --users 1000000 --weeks 1 --out {city})")
    folder = tmp_path / "od1m"
    assert main(["trips", "--input", str(city), "--engine", "duckdb", "--counts-out", str(folder)]) == 0
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["users"] >= 990_000
    app = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=300)
    app.session_state[K_SOURCE] = DataSource.COUNTS.value
    app.session_state[K_COUNTS_DIR] = str(folder)
    app.run()
    for page in ("pages/2_OD_release.py", "pages/4_Privacy_budget.py"):
        app.switch_page(page).run()
        assert not app.exception, [e.message for e in app.exception]
        assert not app.error, [e.value for e in app.error]
    app.switch_page("pages/2_OD_release.py").run()
    assert any("published" in m.label.lower() or "pairs" in m.label.lower() for m in app.metric)
