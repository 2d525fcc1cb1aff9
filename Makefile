# Every target installs what it needs: a fresh machine runs `make run` or `make test` directly.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run test test-fast proto lint bench clean

$(STAMP): pyproject.toml setup.py protocol/_speedups.c
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/aiorocketmq demo $(DEMO_ARGS)

# Headless Chromium for the dashboard's browser test (Debian's packages), where apt-get can
# install them; elsewhere that one test is skipped and says why.
BROWSER_STAMP := $(VENV)/.browser

$(BROWSER_STAMP): $(STAMP)
	@if ! command -v chromedriver >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; } \
	      || echo "installing chromium failed: the browser test will be skipped"; \
	  else \
	    echo "chromium and chromium-driver are missing and cannot be installed here: the browser test will be skipped"; \
	  fi; \
	fi
	touch $@

test: $(STAMP) $(BROWSER_STAMP)
	$(PY) -m pytest -q

proto: $(STAMP)
	$(PY) -m aiorocketmq.protocol.generate

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
