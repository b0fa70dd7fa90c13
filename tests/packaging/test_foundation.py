"""The house: package metadata, CLI entry point, config, landing page (AppTest and a real browser)."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest

import odcore
from odcore.cli import build_parser, main
from odcore.paths import REPO_ROOT


def test_version_is_a_string():
    assert isinstance(odcore.__version__, str)
    assert odcore.__version__.count(".") == 2


def test_cli_help_lists_subcommands():
    out = subprocess.run([sys.executable, "-m", "odcore", "--help"], capture_output=True, text=True,
                         cwd=REPO_ROOT, check=True).stdout
    assert "subcommands" in out
    choices = build_parser()._subparsers._group_actions[0].choices
    for name in choices:
        assert name in out


def test_cli_domain_error_is_one_line(capsys, monkeypatch):
    import odcore.cli.info as info
    from odcore.errors import ParameterError

    def boom(args):
        raise ParameterError("epsilon must be > 0, got epsilon=-1.")

    monkeypatch.setattr(info, "run", boom)
    assert main(["info"]) == 2
    assert capsys.readouterr().err.strip() == "error: epsilon must be > 0, got epsilon=-1."


def test_engine_never_imports_streamlit():
    offenders = [p for p in (REPO_ROOT / "odcore").rglob("*.py") if "import streamlit" in p.read_text()]
    assert offenders == []


def test_streamlit_config():
    cfg = tomllib.loads((REPO_ROOT / ".streamlit" / "config.toml").read_text())
    assert cfg["browser"]["gatherUsageStats"] is False
    assert cfg["server"]["headless"] is True
    assert cfg["server"]["maxUploadSize"] >= 200


def test_landing_page_apptest():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception
    assert at.title[0].value == "OD Privacy Lab"
    assert any("per metric" in m.value for m in at.markdown)


@pytest.mark.browser
def test_landing_page_in_chromium(streamlit_url, page):
    page.goto(streamlit_url, wait_until="domcontentloaded")
    page.get_by_role("heading", name="OD Privacy Lab").first.wait_for(timeout=60_000)
    assert page.title() == "OD Privacy Lab"
    assert page.locator("[data-testid='stException']").count() == 0
