"""Tests of the dashboard's pages (AppTest) and odapp."""

import importlib
import pkgutil

from streamlit.testing.v1 import AppTest

import odapp
from odapp.data.loading import apply_upload
from odapp.shared.state import K_SOURCE, DataSource
from odcore.paths import REPO_ROOT


def cache_modules() -> list:
    """Every ``cache`` module of the app's folders (each page's or feature's cached computations)."""
    return [importlib.import_module(m.name) for m in pkgutil.walk_packages(odapp.__path__, "odapp.")
            if m.name.endswith(".cache")]


def app_on_upload(raw: bytes, name: str) -> AppTest:
    """The app, run once, with ``raw`` read as the person's upload ``name`` (through the app's own upload path) and
    the upload chosen as the data source: the next page switched to runs on it."""
    at = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=600)
    at.run()
    state: dict = {}
    assert apply_upload(state, raw, name)
    for k, v in state.items():
        at.session_state[k] = v
    at.session_state[K_SOURCE] = DataSource.UPLOAD.value
    return at
