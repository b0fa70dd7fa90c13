"""Streamlit-side code of the OD Privacy Lab dashboard, a folder per page or feature (``release``, ``attack``, ``budget``,
``designer``, ``game``, ``knock``, ``audit``, ``recovery``, ``live``, ``facts``) beside what they share (``shared``,
``data``, ``maps``, ``components``).

Only this package, ``app.py`` and ``pages/`` import streamlit. The engine (:mod:`odcore`) does the arithmetic;
each folder's ``cache`` module holds its cached wrappers keyed on small things (dataset id, frozen configs, seed).
"""
