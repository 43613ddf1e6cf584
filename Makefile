# Set-up, demo, tests and benchmarks.  Every target creates .venv on first use
# (and again whenever pyproject.toml changes), so each works on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
DEMO_INPUT := '{"ticket": "I was charged twice, please refund me"}'

.PHONY: chromium ui-bench setup demo test test-fast lint types unit soak bench bench-quick bench-peers bench-cluster bench-server bench-agents bench-plans bench-cost bench-months clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $@

# The browser tests (tests/browser/) drive Debian's chromium: installed here when missing
# (as root, else with sudo); Playwright never downloads a browser.
setup: $(STAMP) chromium

chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update && apt-get install -y chromium; \
	  elif command -v sudo >/dev/null 2>&1; then sudo apt-get update && sudo apt-get install -y chromium; \
	  else echo "chromium is missing and this user cannot install it:" \
	    "run 'apt-get install -y chromium' as root (the browser tests skip without it)"; fi; }

demo: setup
	$(BIN)/plait run examples/support_router/flow.yaml --input $(DEMO_INPUT)

lint: setup
	$(BIN)/ruff check src tests examples benchmarks

types: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest -q --durations=30

test: lint types unit

# While working: lint, types and the tests not marked slow (no `plait` processes,
# workers, servers or browsers), a small fraction of the suite's time.  `make test`
# (and CI) still run everything.
test-fast: lint types
	$(BIN)/pytest -q -m "not slow"

# The kill -9 chaos test of tests/acceptance/test_cluster_faults.py for longer: four
# workers, one SIGKILLed every 2 s, waves of runs submitted for SOAK_SECONDS (default
# 600) until then; needs PostgreSQL (PLAIT_TEST_DATABASE_URL).  Then the local crash
# test (tests/acceptance/test_crash_resume.py) with SOAK_KILLS kill -9 of `plait run`
# per workflow (4 in `make test`).  Not part of `make test`.
SOAK_SECONDS ?= 600
SOAK_KILLS ?= 100
soak: setup
	PLAIT_SOAK_SECONDS=$(SOAK_SECONDS) $(BIN)/pytest -q -s -p no:cacheprovider \
		tests/acceptance/test_cluster_faults.py -k kill9_chaos
	PLAIT_CRASH_KILLS=$(SOAK_KILLS) $(BIN)/pytest -q -p no:cacheprovider \
		tests/acceptance/test_crash_resume.py

# memory, and durable SQLite with synchronous=NORMAL and FULL
BENCH_DBS := --db 'sqlite:///{tmp}/bench.db' --db 'sqlite:///{tmp}/bench.db?synchronous=FULL'

bench: setup
	$(BIN)/python benchmarks/run.py $(BENCH_DBS)
	$(BIN)/python benchmarks/quote_readme.py

bench-quick: setup
	$(BIN)/python benchmarks/run.py --quick $(BENCH_DBS)

bench-peers: setup
	bash benchmarks/peers/run.sh
	$(BIN)/python benchmarks/quote_readme.py

# many workers on PostgreSQL (PLAIT_TEST_DATABASE_URL's server; pgbench from postgresql-client)
bench-cluster: setup
	$(BIN)/python benchmarks/cluster.py --out benchmarks/cluster.json --md benchmarks/CLUSTER.md
	$(BIN)/python benchmarks/quote_readme.py

# plait serve under load: 200 clients polling run status while runs execute (SQLite,
# and PostgreSQL at PLAIT_TEST_DATABASE_URL when it answers); SERVER_SECONDS each
SERVER_SECONDS ?= 20
bench-server: setup
	$(BIN)/python benchmarks/server_load.py --seconds $(SERVER_SECONDS) \
		--out benchmarks/server.json --md benchmarks/SERVER.md
	$(BIN)/python benchmarks/quote_readme.py

# journaled calls (ctx.run) on memory, SQLite and PostgreSQL, and an agent loop against
# LangGraph and DBOS (their venv made by peers/run.sh): JOURNAL.md, AGENTS.md
BENCH_NOTE ?=
bench-agents: setup
	$(BIN)/python benchmarks/journal_cost.py --out benchmarks/journal.json \
		--md benchmarks/JOURNAL.md --note "$(BENCH_NOTE)"
	bash benchmarks/peers/run.sh --make-venv
	$(BIN)/python benchmarks/agent_loop.py --out benchmarks/agents.json \
		--md benchmarks/AGENTS.md --note "$(BENCH_NOTE)"
	$(BIN)/python benchmarks/quote_readme.py

# definitions written at run time (benchmarks/PLANS.md) and streamed model output, on
# SQLite and, with PLAIT_TEST_DATABASE_URL, on PostgreSQL with the step on a worker
# (benchmarks/STREAM.md)
bench-plans: setup
	$(BIN)/python benchmarks/written_definition.py --out benchmarks/plans.json \
		--md benchmarks/PLANS.md
	$(BIN)/python benchmarks/stream_latency.py --out benchmarks/stream.json \
		--md benchmarks/STREAM.md --db sqlite \
		$(if $(PLAIT_TEST_DATABASE_URL),--db postgresql,)
	$(BIN)/python benchmarks/quote_readme.py

# what a completed step costs the database (benchmarks/STEPCOST.md): statements, rows,
# bytes, WAL and CPU on PostgreSQL (PLAIT_TEST_DATABASE_URL's server; statements are
# counted in its log, which this user must be able to read) and on SQLite
COST_RUNS ?= 50
COST_SINGLE_RUNS ?= 300
bench-cost: setup
	$(BIN)/python benchmarks/step_cost.py --runs $(COST_RUNS) --single-runs $(COST_SINGLE_RUNS) \
		--out benchmarks/stepcost.json --md benchmarks/STEPCOST.md
	$(BIN)/python benchmarks/quote_readme.py

# after months of use, on PostgreSQL (benchmarks/MONTHS.md): a 1,000-step chain whose
# first step returns 100 KB against 100 B (benchmarks/bigchain.json), and the
# throughput of 4 workers with 100,000 finished runs in the database, idle and while
# `plait prune` deletes them (MONTHS_RUNS; benchmarks/months.json)
MONTHS_RUNS ?= 100000
bench-months: setup
	$(BIN)/python benchmarks/cluster.py --only bigchain --out benchmarks/bigchain.json
	$(BIN)/python benchmarks/prune_load.py --runs $(MONTHS_RUNS) \
		--bigchain benchmarks/bigchain.json --out benchmarks/months.json \
		--md benchmarks/MONTHS.md
	$(BIN)/python benchmarks/prune_disk.py --runs 500 --out benchmarks/prune.json \
		--md benchmarks/DISK.md
	$(BIN)/python benchmarks/quote_readme.py

# the run page with a 10,000-step run in chromium (benchmarks/UI.md)
ui-bench: setup
	$(BIN)/python benchmarks/ui_run_page.py --steps 10000 --md benchmarks/UI.md

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .plait
