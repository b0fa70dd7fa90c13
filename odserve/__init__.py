"""The class launcher: several Streamlit servers of the dashboard behind HAProxy, under a supervisor
(``python -m odserve``, ``make class``)."""
