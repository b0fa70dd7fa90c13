"""AppTest: names from the data show as the characters they are on every page, never as a link, an image, HTML or a
Streamlit directive.

One session loads an upload whose file name, user column name and every user id are markup (tests/hostile/names.py),
with a zone file whose name and every zone's name are markup, walks every page, plays a round of the attacker game
on several game seeds (every person of the upload has a hostile id, so every seed deals one) and reads what each page
sends to the browser the way the browser would: Markdown fields through a CommonMark parser, Plotly figures' text as
Plotly's HTML, the map's tooltip mode.
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from odapp.data.loading import UploadOptions, apply_upload
from odapp.data.zones_ui import apply_zone_upload
from odapp.shared.state import K_SOURCE, K_UPLOAD_TRACES, DataSource
from odcore.paths import REPO_ROOT
from tests.hostile import names

pytestmark = pytest.mark.timeout(600)

PAGES = ["pages/0_Home.py", "pages/1_Data.py", "pages/2_OD_release.py", "pages/3_Attack.py",
         "pages/4_Privacy_budget.py", "pages/5_Knock_Knock.py", "pages/6_Release_designer.py",
         "pages/7_Play_the_attacker.py", "pages/8_See_the_noise.py", "pages/9_Audit.py"]
GAME_SEEDS = range(8)


@pytest.fixture(scope="module")
def hostile_at():
    at = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=300)
    at.run()
    state: dict = {}
    # eight days of hourly fixes: enough for Knock Knock's weekly series too
    assert apply_upload(state, names.traces_csv(per_user=24 * 8), names.FILE_NAME,
                        UploadOptions(mapping=(("user", names.USER_COLUMN),))), state
    assert apply_zone_upload(state, names.zones_geojson(), names.ZONE_FILE_NAME), state
    for k, v in state.items():
        at.session_state[k] = v
    at.session_state[K_SOURCE] = DataSource.UPLOAD.value
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.session_state[K_UPLOAD_TRACES].summary["users"] == 40
    return at


def _run(at, page: str | None = None):
    if page:
        at.switch_page(page)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_the_checks_find_markup_from_data():
    # the checks themselves: each payload written as it is would be found, written through the helpers it is not
    from odapp.shared.words import chart_text, plain

    for p in names.PAYLOADS:
        assert names.markdown_findings(f"Round 1 · person {p}'s trips"), p
        assert not names.markdown_findings(f"Round 1 · person {plain(p)}'s trips"), p
    assert names.plotly_findings('{"layout": {"title": {"text": "user ' + names.PAYLOADS[4].replace('"', '\\"')
                                 + '"}}}')
    assert not names.plotly_findings('{"layout": {"title": {"text": "user '
                                     + chart_text(names.PAYLOADS[4]).replace('"', '\\"') + '"}}}')


@pytest.mark.parametrize("page", PAGES)
def test_every_page_shows_names_from_the_data_as_text(hostile_at, page):
    at = _run(hostile_at, page)
    assert names.page_findings(at) == []


def test_the_zone_file_is_in_use_and_its_names_reach_the_pages(hostile_at):
    at = _run(hostile_at, "pages/1_Data.py")
    shown = " ".join(c.value for c in at.sidebar.caption)
    assert "zones&#46;png" in shown.replace("&#8203;", "")       # the zone file's name, written as characters
    assert names.page_findings(at) == []


def test_attack_page_by_id_and_population_show_ids_as_text(hostile_at):
    at = _run(hostile_at, "pages/3_Attack.py")
    at.radio(key="attack_pick").set_value("by id")
    _run(at)
    assert names.HOST in at.text_input(key="attack_uid").value    # the id as it is, in a plain-text field
    at.toggle(key="attack_population").set_value(True)
    _run(at)
    assert names.page_findings(at) == []
    at.toggle(key="attack_population").set_value(False)
    at.radio(key="attack_pick").set_value(at.radio(key="attack_pick").options[0])
    _run(at)


@pytest.mark.parametrize("seed", GAME_SEEDS)
def test_every_game_seed_shows_the_person_as_text(hostile_at, seed):
    at = _run(hostile_at, "pages/7_Play_the_attacker.py")
    at.number_input(key="game_seed").set_value(seed)
    _run(at)
    heading = next(h.value for h in at.subheader if h.value.startswith("Round 1 "))
    assert "&#" in heading                                     # the person's hostile id, as character references
    assert names.page_findings(at) == []
    at.button(key="game_in").click()
    _run(at)                                                   # the reveal of round 1 and round 2
    assert any(h.value.startswith("Round 2 ") for h in at.subheader)
    assert names.page_findings(at) == []


def test_knock_knock_results_show_targets_as_text(hostile_at):
    at = _run(hostile_at, "pages/5_Knock_Knock.py")
    at.selectbox(key="knock_prior").set_value("subset")
    at.number_input(key="knock_m").set_value(5)
    at.slider(key="knock_alpha").set_value(0.5)
    next(b for b in at.button if b.label == "Run the experiment").click()
    _run(at)
    assert not at.error, [e.value for e in at.error]
    targets = at.selectbox(key="knock_roc_target").options
    assert any(names.HOST in t for t in targets), targets      # the targets are people with hostile ids
    assert names.page_findings(at) == []
