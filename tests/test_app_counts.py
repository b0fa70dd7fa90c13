"""AppTest: an OD counts folder (``trips --counts-out DIR``) as the dashboard's data source.

The release and budget pages work from the counts; the pages that need each person's pairs or traces say so.
"""

from __future__ import annotations

import pytest

from odapp.state import K_COUNTS_DIR, K_SOURCE, DataSource
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
