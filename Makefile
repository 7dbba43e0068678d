# Two commands set everything up on a fresh machine:
#   make demo   installs into .venv and opens the console on a private Redis with demo load
#   make test   installs into .venv (redis-server included) and runs the whole suite (ruff,
#               mypy, the import contracts of pyproject.toml, pytest)
#   make test-unit  the pure-logic tests alone (tests/unit: no Redis, seconds)
#   make test-cluster  the Redis-semantics suite again on a local 3-master Redis Cluster
#   make docs   builds the docs site (mkdocs, strict: a broken link fails it) into site/
#   make chaos  the long chaos run: thousands of workflows while agents, connections and Redis fail
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-unit test-cluster chaos docs lint bench screenshots clean

$(BIN)/redisflow: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# setuptools warns of every editable install in a box that -q does not hide: that
	# one warning is filtered by its message, errors and other warnings still show
	PYTHONWARNINGS="ignore:Editable installation" $(BIN)/pip install -q -e '.[test,embedded,console]'
	touch $@

demo: $(BIN)/redisflow
	$(BIN)/redisflow-tui --demo

# Four pytest workers (pytest-xdist), each with its own redis-server, on two cores: most
# tests wait on processes, servers and timeouts rather than compute (two workers kept the
# cores 40 % busy, four 85 %). The slow ones start first (tests/conftest.py), so that
# they overlap the short ones.
WORKERS ?= 4

test: $(BIN)/redisflow
	$(BIN)/ruff check .
	$(BIN)/mypy --strict engine
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -n $(WORKERS) --maxschedchunk 1

# The pure-logic tests alone: the definition language, loaders, schedules' clock, HTTP
# guards, fuzzing; no Redis, no process (the whole suite runs them too)
test-unit: $(BIN)/redisflow
	$(BIN)/python -m pytest -q tests/unit

# The Redis-semantics tests again on a local 3-master Redis Cluster (one per worker), one
# shard per master: the tests on the session's Redis (fixtures redis_url, engine, cli_env,
# the console's) but those marked same_on_cluster; pure-logic tests and those on a server
# of their own are deselected, and those marked single_redis skipped (tests/conftest.py)
test-cluster: $(BIN)/redisflow
	$(BIN)/python -m pytest -q -n $(WORKERS) --maxschedchunk 1 --cluster

chaos: $(BIN)/redisflow
	RF_CHAOS_LONG=1 $(BIN)/python -m pytest -q -s tests/test_chaos.py -k long

# The docs extra (and http's, for the API reference generated from the server's OpenAPI
# document) on top of the venv's, once per change of pyproject.toml.
$(VENV)/.docs-installed: $(BIN)/redisflow
	PYTHONWARNINGS="ignore:Editable installation" $(BIN)/pip install -q -e '.[docs,http]'
	touch $@

docs: $(VENV)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: $(BIN)/redisflow
	$(BIN)/redisflow-demo --shape fan10 --workflows 10000 --agents 2

screenshots: $(BIN)/redisflow
	$(BIN)/python scripts/screenshots.py
	$(BIN)/python scripts/screenshot_timeline.py
	$(BIN)/python scripts/screenshot_bulk.py
	$(BIN)/python scripts/screenshot_observability.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache site
