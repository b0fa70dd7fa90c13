"""The app's navigation as data: its pages, their names and their addresses (``app.py`` hands them to
``st.navigation``). Streamlit is imported only by :func:`declare`, so the guided tour and the tests read the
entries without a running app."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

PAGES_DIR = Path(__file__).resolve().parents[2] / "pages"
HOME_FILE = "pages/0_Home.py"


@dataclass(frozen=True)
class NavEntry:
    """One entry of the navigation (``app.py`` hands them to ``st.navigation``)."""

    file: str        # relative to the repository root, as st.switch_page and AppTest.switch_page take it
    title: str       # the entry's name in the navigation
    url_path: str    # the page's address after the app's ("" for Home, the app's own address)


def nav_entries(pages_dir: Path) -> tuple[NavEntry, ...]:
    """Home first, then every other ``pages/N_Name.py`` in the order of its number N (``10_`` after ``9_``), titled
    "Name" with its underscores as spaces and served at ``/Name``: the addresses Streamlit gave the files before the
    navigation was declared, so bookmarks and links keep working, and a page file added to ``pages/`` appears
    without being listed here."""
    out = [NavEntry(HOME_FILE, "Home", "")]

    def order(f: Path) -> tuple[int, str]:
        m = re.match(r"^([0-9]+)", f.stem)
        return (int(m.group(1)) if m else 10**9, f.name)

    for f in sorted(pages_dir.glob("*.py"), key=order):
        if f"pages/{f.name}" == HOME_FILE:
            continue
        name = re.sub(r"^[0-9]+[_ -]*", "", f.stem) or f.stem
        out.append(NavEntry(f"pages/{f.name}", name.replace("_", " "), name))
    return tuple(out)


NAV = nav_entries(PAGES_DIR)


def declare():
    """Hand :data:`NAV` to ``st.navigation`` (Home the default page, at the app's address); returns the page to run."""
    return st.navigation([st.Page(e.file, title=e.title, url_path=e.url_path, default=not e.url_path) for e in NAV])
