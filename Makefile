# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000
# What `make test-fast` leaves out (the markers are in pyproject.toml).
FAST := not live and not browser and not load and not fault and not model and not race
# What `make test` runs one test at a time: load and fault runs, and races of many processes
# on the same rows, each of which needs the machine's two cores to itself.
APART := load or fault or race

.PHONY: run test test-fast explore loadtest faults bench lint format clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.runtime: requirements.txt | $(VENV)/bin/python
	bash scripts/ensure-system.sh build
	$(PY) -m pip install -q -r requirements.txt
	touch $@

$(VENV)/.dev: requirements.txt requirements-dev.txt | $(VENV)/bin/python
	bash scripts/ensure-system.sh test
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@ $(VENV)/.runtime

## Serve the application on http://127.0.0.1:$(PORT) with demo data.
run: $(VENV)/.runtime
	PORT=$(PORT) $(PY) scripts/serve.py

## Run the whole suite against MariaDB and Redis on 127.0.0.1: all but the load, fault and race
## tests on three processes (servers, workers and browsers included: most of them wait on what
## they started, so a third process keeps both cores busy), then those one test at a time, each
## run printing its 20 slowest; then the race tests again on SQLite, the database of the
## zero-setup `make run` (a file under var/).
test: $(VENV)/.dev
	bash scripts/ensure-services.sh
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	DJANGO_SETTINGS_MODULE=config.settings.test $(PY) manage.py makemigrations --check --dry-run
	$(PY) -m pytest -n 3 -m "not ($(APART))" --durations=20
	$(PY) -m pytest -m "$(APART)" --durations=20
	DATABASE_URL=sqlite:///$(CURDIR)/var/race.sqlite3 $(PY) -m pytest -m race

## The tests that start no server, worker, browser, load or fault run, on two processes
## (pytest-xdist): under three minutes, for the edit-and-check loop. `make test` stays the whole.
test-fast: $(VENV)/.dev
	bash scripts/ensure-services.sh
	$(PY) -m pytest -n 2 -m "$(FAST)"

## The model-based tests (tests/model/) with fresh seeds for EXPLORE_MINUTES (default 10),
## printing the runs and the rules covered; stops at the first failure with its shrunk story.
explore: $(VENV)/.dev
	bash scripts/ensure-services.sh
	$(PY) scripts/explore.py

## The Locust verdict matrix: every strategy, audited, for vouchers and prize pools (options: make loadtest ARGS="--scenario all").
loadtest: $(VENV)/.dev
	bash scripts/ensure-services.sh
	$(PY) -m loadtests.run $(ARGS)

## One fault at a time mid-sale (a gunicorn worker killed; Redis restarted empty; the Celery worker killed; MariaDB restarted; a lock holder stopped past its lease; one, then two of three Redlock servers stopped; holds: the worker killed inside a release, expiry tasks lost, Redis restarted with units held, payments confirmed late; a Redis Cluster master killed for its replica, with WAIT and without), audited (options: make faults ARGS="--faults redis-restart").
faults: $(VENV)/.dev
	bash scripts/ensure-services.sh
	$(PY) -m loadtests.faults $(ARGS)

## Benchmarks (they print their figures and the machine): locks, purchase throughput, draw throughput by pool size, the redis_lua script, what WAIT costs it on a Redis Cluster, one voucher's bucket states on one Redis and on 3 masters, redis_lua over HTTP, what the metrics cost, what a read of the token revocations costs, every request and beat task on a big site against a small one.
bench: $(VENV)/.dev
	bash scripts/ensure-services.sh
	$(PY) -m benchmarks.locks
	$(PY) -m benchmarks.purchase
	$(PY) -m benchmarks.draw
	$(PY) -m benchmarks.reservations
	$(PY) -m benchmarks.replicas
	$(PY) -m benchmarks.reservations_buckets
	$(PY) -m benchmarks.persist_consumers
	$(PY) -m benchmarks.http
	$(PY) -m benchmarks.metrics
	$(PY) -m benchmarks.revocations
	$(PY) -m benchmarks.history

lint: $(VENV)/.dev
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

format: $(VENV)/.dev
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache
