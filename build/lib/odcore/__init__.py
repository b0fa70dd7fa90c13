"""OD Privacy Lab engine: traces -> weekly OD counts -> DP release -> attacks and privacy budgets.

The engine never imports streamlit; the dashboard (``app.py``, ``pages/``) and the command line
(``python -m odcore``) are thin layers over the same functions.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
