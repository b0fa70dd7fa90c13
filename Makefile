# Two commands do everything on a fresh machine (Python >= 3.11):
#   make run    create .venv if missing, install requirements.txt, start the dashboard
#   make test   create .venv if missing, install requirements-dev.txt, run ruff and the test suite on both cores
# and for a class (docs/class.md):
#   make class  WORKERS servers behind HAProxy on ADDRESS:PORT (Debian package haproxy), restarted if one dies
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8501
WORKERS ?= 2
ADDRESS ?= 127.0.0.1
LOGDIR ?=

.PHONY: run class test test-all lint bench screenshots sample-data districts clean

# Both cores; one test file per worker at a time (module fixtures such as the AppTest session are built once), the
# longest files first (tests/longest_first.py).
PYTEST_PAR ?= -n 2 --dist loadfile --durations=15

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.app-installed: requirements.txt | $(PY)
	$(PY) -m pip install -q -r requirements.txt
	touch $@

$(VENV)/.dev-installed: requirements.txt requirements-dev.txt | $(PY)
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@ $(VENV)/.app-installed

run: $(VENV)/.app-installed
	$(PY) -m streamlit run app.py --server.port $(PORT)

# make class WORKERS=4 ADDRESS=0.0.0.0 LOGDIR=class_logs: share it on the network on purpose, logs kept there;
# COUNTS_DIR=dir: counts folders the class may open (no other folder can be named in the app)
class: $(VENV)/.app-installed
	$(PY) -m odserve --workers $(WORKERS) --address $(ADDRESS) --port $(PORT) $(if $(LOGDIR),--log-dir $(LOGDIR)) $(if $(COUNTS_DIR),--counts-dir $(COUNTS_DIR))

test: $(VENV)/.dev-installed
	$(PY) -m ruff check .
	$(PY) -m pytest $(PYTEST_PAR)

test-all: $(VENV)/.dev-installed
	$(PY) -m ruff check .
	$(PY) -m pytest $(PYTEST_PAR) -m ""

# Update the committed screenshots in docs/screenshots (the browser tests otherwise write to a temporary folder).
screenshots: $(VENV)/.dev-installed
	ODLAB_SHOTS=docs/screenshots $(PY) -m pytest -m browser tests/browser/test_browser.py tests/browser/test_browser_guide.py tests/browser/test_browser_map.py

lint: $(VENV)/.dev-installed
	$(PY) -m ruff check .

bench: $(VENV)/.dev-installed
	$(PY) -m benchmarks

sample-data: $(VENV)/.app-installed
	$(PY) -m odcore synth --out sample_data/synthetic_city.parquet
	$(PY) -m odcore districts --out sample_data/districts.geojson

districts: $(VENV)/.app-installed
	$(PY) -m odcore districts --out sample_data/districts.geojson

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
