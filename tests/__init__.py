"""The tests, laid out like the code they check; shared fixtures are in conftest.py."""
