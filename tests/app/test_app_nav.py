"""The navigation (``app.py``, :mod:`odapp.shared.nav`): the first entry is "Home", every page keeps the address Streamlit
gave its file before the navigation was declared (bookmarks and links still work), every file of ``pages/`` is an
entry, and each page file still runs on its own (``AppTest.from_file``) as well as through the navigation. In a
browser: the entries' names and addresses, and a page opened by its own address."""

from __future__ import annotations

import pytest

from odapp.shared.nav import HOME_FILE, NAV, PAGES_DIR, nav_entries
from odcore.paths import REPO_ROOT

# The addresses of the pages when Streamlit derived them from the file names (pages/N_Name.py -> /Name).
ADDRESSES = ["", "Data", "OD_release", "Attack", "Privacy_budget", "Knock_Knock", "Release_designer",
             "Play_the_attacker", "See_the_noise", "Audit", "Trajectory_recovery"]


def test_first_entry_is_home_and_addresses_are_kept():
    assert (NAV[0].title, NAV[0].file, NAV[0].url_path) == ("Home", HOME_FILE, "")
    assert [e.url_path for e in NAV] == ADDRESSES
    assert [e.title for e in NAV][1:4] == ["Data", "OD release", "Attack"]
    assert sorted(e.file for e in NAV) == sorted(f"pages/{f.name}" for f in PAGES_DIR.glob("*.py"))
    assert "app" not in [e.title.lower() for e in NAV]


def test_a_new_page_file_gets_an_entry(tmp_path):
    (tmp_path / "0_Home.py").write_text("")
    (tmp_path / "12_Zone_atlas.py").write_text("")
    (tmp_path / "2_OD_release.py").write_text("")
    got = [(e.file, e.title, e.url_path) for e in nav_entries(tmp_path)]
    assert got == [(HOME_FILE, "Home", ""), ("pages/2_OD_release.py", "OD release", "OD_release"),
                   ("pages/12_Zone_atlas.py", "Zone atlas", "Zone_atlas")]     # by number: 12 after 2


def test_every_page_through_the_navigation(at):
    from tests.app.test_app_pages import _no_errors

    for e in NAV:
        at.switch_page(e.file).run()
        _no_errors(at)
    at.switch_page(HOME_FILE).run()
    assert at.title[0].value == "OD Privacy Lab"


@pytest.mark.slow
@pytest.mark.parametrize("entry", NAV, ids=[e.url_path or "Home" for e in NAV])
def test_each_page_file_runs_on_its_own(entry):
    from streamlit.testing.v1 import AppTest

    a = AppTest.from_file(str(REPO_ROOT / entry.file), default_timeout=300).run()
    assert not a.exception, [x.message for x in a.exception]
    assert a.title, entry.file


@pytest.mark.browser
@pytest.mark.timeout(600)
def test_navigation_in_a_browser(browser, tmp_path):
    """On a server of its own, so that a bookmark of a page is the server's first visit (Streamlit's navigation from
    the pages/ folder, first entry "app", until a run has declared the app's: odapp.shared.layout.declared_navigation)."""
    from benchmarks import harness
    from tests.browser.test_browser import _settle

    def entries():
        nav = page.locator("[data-testid=stSidebarNav] a")
        nav.first.wait_for(timeout=180_000)
        return ([t.strip() for t in nav.all_inner_texts()],
                nav.evaluate_all("els => els.map(e => e.getAttribute('href') || '')"))

    with harness.streamlit_server(tmp_path / "streamlit.log") as url:
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        # a page opened by its own address, first: its page, under the app's navigation
        page.goto(url.rstrip("/") + "/Attack", wait_until="domcontentloaded")
        page.get_by_role("heading", name="Attack", exact=True).first.wait_for(timeout=180_000)
        _settle(page)
        # the page's own cards (the guarantee card's metrics above them are in a closed expander, hidden)
        page.locator("[data-testid=stMetric]").filter(has_text="Success with k = 3 trips").first.wait_for(
            timeout=180_000)
        assert page.locator("[data-testid='stException']").count() == 0
        names, hrefs = entries()
        assert names == [e.title for e in NAV], names
        assert [h.rstrip("/").rsplit("/", 1)[-1] if e.url_path else "" for h, e in zip(hrefs, NAV, strict=True)] \
            == ADDRESSES, hrefs
        # the app's root: Home; a link of its list opens its page in the same session
        page.goto(url, wait_until="domcontentloaded")
        page.get_by_role("heading", name="OD Privacy Lab", exact=True).first.wait_for(timeout=180_000)
        _settle(page)
        assert entries()[0][:3] == ["Home", "Data", "OD release"]
        page.locator("[data-testid=stPageLink] a").filter(has_text="See the noise").first.click()
        page.get_by_role("heading", name="See the noise", exact=True).first.wait_for(timeout=180_000)
        page.context.close()
