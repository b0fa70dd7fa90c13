"""The tests, laid out like the code they check; shared fixtures are in conftest.py."""

import logging


class _NoRuntimeLine(logging.Filter):
    """The tests call the app's cached functions outside ``streamlit run``: Streamlit then keeps their results in
    memory, as these tests want, and says so at every import and call ("No runtime found"); that line is not shown."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "No runtime found" not in record.getMessage()


for _name in ("streamlit.runtime.caching.cache_data_api", "streamlit.runtime.caching.cache_resource_api"):
    logging.getLogger(_name).addFilter(_NoRuntimeLine())

