"""The Trajectory recovery page and the Attack page's learned-attacks section (AppTest)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from odcore.paths import REPO_ROOT
from tests.app.map_element import map_elements

pytestmark = pytest.mark.timeout(900)


def _open(page: str) -> AppTest:
    at = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=600).run()
    at.switch_page(page).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _metric(at: AppTest, start: str) -> str:
    return next(m.value for m in at.metric if m.label.startswith(start))


def test_recovery_page_opens_on_the_map_with_scores():
    at = _open("pages/10_Trajectory_recovery.py")
    assert not at.error
    acc = float(_metric(at, "Accuracy").rstrip(" %"))
    chance = float(_metric(at, "Chance").rstrip(" %"))
    assert acc > chance + 10          # the bundled city, 150 people over 2 days: ~44 % against ~9 %
    assert map_elements(at)   # the map


@pytest.mark.slow
def test_recovery_page_defence_and_sweep():
    at = _open("pages/10_Trajectory_recovery.py")
    clean = float(_metric(at, "Accuracy").rstrip(" %"))
    at.selectbox(key="recover_defence").set_value("laplace").run()
    at.select_slider(key="recover_eps").set_value(0.1).run()
    assert not at.exception
    assert float(_metric(at, "Accuracy").rstrip(" %")) < clean
    at.button(key="recover_run_sweep").click().run()
    assert not at.exception, [e.message for e in at.exception]
    table = at.dataframe[0].value
    assert list(table["defence"]) == ["laplace", "threshold", "bounding", "lpa"]


@pytest.mark.slow
def test_attack_page_learned_section_reports_the_gap():
    at = _open("pages/3_Attack.py")
    at.button(key="attack_learned_run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    gap = float(_metric(at, "Gap of Knock Knock").split()[0])
    two = float(_metric(at, "Gap of the two-threshold").split()[0])
    assert gap > two                  # the classifiers fall further below p_k than the two-threshold rule
