"""OD Privacy Lab (``streamlit run app.py``): the navigation. Each entry is a file of ``pages/`` at the address it
has always had (:data:`odapp.shared.nav.NAV`); the first, "Home" (``pages/0_Home.py``), is the landing page."""

from __future__ import annotations

from odapp.shared.nav import declare

declare().run()
