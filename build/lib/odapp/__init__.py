"""Streamlit-side helpers of the OD Privacy Lab dashboard.

Only this package, ``app.py`` and ``pages/`` import streamlit. The engine (:mod:`odcore`) does the arithmetic;
this package holds the shared sidebar settings (explicit ``st.session_state`` keys), cached wrappers keyed on small
things (dataset id, frozen configs, seed), export helpers (PNG/SVG via kaleido, CSV, CLI-ready JSON), number
formatting in words and the display of engine errors.
"""
