# Statehold: the README's two commands are `make run` and `make test`.
NODE      ?= node
NODE_ARGS := --no-node-snapshot
# The node's own process: the same flags as bin/statehold.js's first line (test/launch-flags.test.ts);
# README, Configuration, says why the old-generation floor.
SERVE_NODE_ARGS ?= --no-node-snapshot --initial-old-space-size=160
PORT      ?= 8787
DATA_DIR  ?= ./data

.PHONY: all install build run test bench clean cluster-up cluster-down

all: build

# Install npm packages when they are missing or older than the lock file. `npm install` honours the lock;
# `npm ci` is avoided because npm 11 misreads the lock's optional native packages (msgpackr-extract).
node_modules/.installed: package.json $(wildcard package-lock.json)
	npm install --no-audit --no-fund
	@touch $@

install: node_modules/.installed

build: install
	npx --no-install tsc -p tsconfig.json

run: build
	$(NODE) $(SERVE_NODE_ARGS) dist/bin/statehold.js serve --port $(PORT) --data-dir $(DATA_DIR)

test: build
	npx --no-install tap

bench: build
	$(NODE) $(NODE_ARGS) bench/run.mjs

clean:
	rm -rf dist .tap coverage

# A cluster on this host: NODES statehold nodes (default 3) and their nats-servers (3 for 3+ nodes,
# else 1), data and logs in CLUSTER_DIR (default ./cluster-data); cluster/README.md.
cluster-up: build
	$(NODE) cluster/launch.mjs up

cluster-down:
	$(NODE) cluster/launch.mjs down
