"""OD Privacy Lab (``streamlit run app.py``): the navigation. Each entry is a file of ``pages/`` at the address it
has always had (:data:`odapp.nav.NAV`); the first, "Home" (``pages/0_Home.py``), is the landing page."""

from __future__ import annotations

import streamlit as st

from odapp.nav import NAV

st.navigation([st.Page(e.file, title=e.title, url_path=e.url_path, default=not e.url_path) for e in NAV]).run()
