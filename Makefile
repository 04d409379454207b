# Statehold: the README's two commands are `make run` and `make test`.
NODE      ?= node
NODE_ARGS := --no-node-snapshot
# The node's own process: the same flags as bin/statehold.js's first line (test/launch-flags.test.ts);
# docs/configuration.md says why the old-generation floor.
SERVE_NODE_ARGS ?= --no-node-snapshot --initial-old-space-size=160
PORT      ?= 8787
DATA_DIR  ?= ./data
# Empty: the node's own default (127.0.0.1, or STATEHOLD_HOST); `make run HOST=0.0.0.0` for other hosts.
HOST      ?=

.PHONY: all install build run test test-build test-cluster bench clean cluster-up cluster-down

all: build

# Install npm packages when they are missing or older than the lock file. `npm install` honours the lock;
# `npm ci` is avoided because npm 11 misreads the lock's optional native packages (msgpackr-extract).
node_modules/.installed: package.json $(wildcard package-lock.json)
	npm install --no-audit --no-fund
	@touch $@

install: node_modules/.installed

# The host's TypeScript, then the in-isolate JavaScript: checked by its own tsconfig (the isolate's
# globals only) and copied unchanged beside the host code that reads it (src/sandbox/isolate-sources.ts).
# Built again only when a source, the console or a build setting changed since (dist/.built; a folder
# counts, so a file removed does too), so that `make test` or `make run` after `make build` (as CI
# does) does not compile it all twice.
BUILD_INPUTS := $(shell find src console) package.json tsconfig.json
dist/.built: node_modules/.installed $(BUILD_INPUTS)
	npm run --silent build
	@touch $@

build: dist/.built

run: build
	$(NODE) $(SERVE_NODE_ARGS) dist/bin/statehold.js serve --port $(PORT) --data-dir $(DATA_DIR)$(if $(HOST), --host $(HOST))

# The drop-in suites run twice: on `statehold serve`, and (when nats-server is installed) on a 3-node
# cluster, R3, each request through the next node (test/helpers/cluster-deployment.ts). `make test`
# takes the core of them in its one tap run: each file of test/on-cluster/ runs its suite so, beside
# the other files (skipped without nats-server). `make test-cluster` runs all that apply to a cluster.
CLUSTER_SUITES_ALL := client-compat-foundation instances durable-timers inter-instance-messaging realtime usage machines history-times history-pages upgrades token-exchange machine-versions orgs-keys-billing event-type-names runtime-behaviour machine-fetch http-api client-compat-smply-bundle security-cross-instance upgrades-v5 xstate-v5 xstate-v5-restore

# The tests run compiled (test/build-tests.mjs: test/ into dist-test/, beside the dist/ they import).
# One file: make test-build && npx tap dist-test/test/<name>.test.js
test: build test-build
	npx --no-install tap

test-build:
	node test/build-tests.mjs

test-cluster: build test-build
	STATEHOLD_TEST_DEPLOYMENT=cluster npx --no-install tap $(CLUSTER_SUITES_ALL:%=dist-test/test/%.test.js)

bench: build
	$(NODE) $(NODE_ARGS) bench/run.mjs

clean:
	rm -rf dist dist-test .tap coverage

# A cluster on this host: NODES statehold nodes (default 3) and their nats-servers (3 for 3+ nodes,
# else 1), data and logs in CLUSTER_DIR (default ./cluster-data); cluster/README.md.
cluster-up: build
	$(NODE) cluster/launch.mjs up

cluster-down:
	$(NODE) cluster/launch.mjs down
