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

# Debian packages a target needs, installed where apt-get can (as root); elsewhere the target
# goes on without them and says what is skipped. $(call apt_need,COMMANDS,PACKAGES,SKIPPED)
define apt_need
	@missing=; for c in $(1); do command -v $$c >/dev/null 2>&1 || missing=1; done; \
	if [ -n "$$missing" ]; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2) >/dev/null; } \
	      || echo "installing $(2) failed: $(3)"; \
	  else \
	    echo "$(2) missing and cannot be installed here: $(3)"; \
	  fi; \
	fi
	touch $@
endef

# Headless Chromium for the dashboard's browser test.
BROWSER_STAMP := $(VENV)/.browser

$(BROWSER_STAMP): $(STAMP)
	$(call apt_need,chromedriver chromium,chromium chromium-driver,the browser test will be skipped)

test: $(STAMP) $(BROWSER_STAMP)
	$(PY) -m pytest -q

proto: $(STAMP)
	$(PY) -m aiorocketmq.protocol.generate

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# redis-server and redis-benchmark, the peer of bench.endtoend.
REDIS_STAMP := $(VENV)/.redis

$(REDIS_STAMP): $(STAMP)
	$(call apt_need,redis-server redis-benchmark,redis-server redis-tools,bench.endtoend will print no Redis rows)

bench: $(STAMP) $(REDIS_STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
