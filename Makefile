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

.PHONY: tools build local up deploy deploy-built down lint check unit integration fuzz test demo bench bench-drift clean \
	lambda-image invoke invoke-test

$(VENV)/tools/.installed: tools/requirements/sam.txt
	$(PYTHON) -m venv $(VENV)/tools
	$(TOOLS)/pip install --quiet --disable-pip-version-check -r $<
	touch $@

$(VENV)/ministack/.installed: tools/requirements/ministack.txt
	$(PYTHON) -m venv $(VENV)/ministack
	$(MINISTACK)/pip install --quiet --disable-pip-version-check -r $<
	touch $@

$(VENV)/fuzz/.installed: tools/requirements/fuzz.txt
	$(PYTHON) -m venv $(VENV)/fuzz
	$(VENV)/fuzz/bin/pip install --quiet --disable-pip-version-check --require-hashes -r $<
	touch $@

tools: $(VENV)/tools/.installed $(VENV)/ministack/.installed $(VENV)/fuzz/.installed

# The bootstraps' profile. `release` (the default, what a deploy to AWS ships): cargo-lambda's
# release build, linked with its zig for Lambda's glibc. `dev`, for `make test`'s local world
# only: the dev profile without debug info, stripped, linked by the host's cc, in its own target
# dir, so it can run beside the unit tests' build (each holds cargo's lock on its own target
# dir). Alone it took 2m08s for the 7 functions; whether the two lanes beat one after the other
# on 2 cores is not shown yet (README, "The two commands"). The tests' and the
# functions' builds cannot share artifacts: cargo resolves features per selection, and the
# workspace's tools and tests turn on features (hyper's server, the SDK's event streams) the
# functions do not have.
LAMBDA_PROFILE ?= release
ifeq ($(LAMBDA_PROFILE),dev)
SAM_BUILD_ENV := env SAM_BUILD_MODE=debug CARGO_LAMBDA_COMPILER=cargo CARGO_PROFILE_DEV_DEBUG=false \
	CARGO_PROFILE_DEV_STRIP=symbols CARGO_TARGET_DIR=$(CURDIR)/target/lambda-dev
else ifneq ($(LAMBDA_PROFILE),release)
$(error LAMBDA_PROFILE is release or dev, not $(LAMBDA_PROFILE))
endif
SAM_BUILD := $(SAM_BUILD_ENV) sam build --template-file template.yaml --build-dir .aws-sam/build --beta-features
# Two local worlds of one checkout (on other ports) share .aws-sam/build: a lock keeps one
# from rebuilding it between another's build and deploy.
LOCKED := mkdir -p .aws-sam && flock .aws-sam/build.lock

## build: sam build through cargo-lambda, one bootstrap per function (no Docker)
build: $(VENV)/tools/.installed
	$(LOCKED) $(SAM_BUILD)
	@ls -l .aws-sam/build/*/bootstrap

## local: MiniStack + sandbox on 127.0.0.1, deploy template.yaml, print outputs, stay in the foreground
local: deploy
	$(TOOLS)/python tools/local/stack.py serve

# Every cargo step selects the whole workspace (targets are filtered, packages are not), so each
# resolves the same features and reuses what the others compiled; the demo and the bench are
# built that way and run from $(BIN), since `cargo run -p` would resolve features of their own.
BIN := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)/debug
up: tools
	cargo build -q --locked --workspace --bin wecom-sandbox
	$(TOOLS)/python tools/local/stack.py up

deploy: up
	$(LOCKED) sh -c '$(SAM_BUILD) && $(TOOLS)/python tools/local/stack.py deploy'

## deploy-built: deploy what the last `make build` left in .aws-sam/build
deploy-built: up
	$(LOCKED) $(TOOLS)/python tools/local/stack.py deploy


down:
	-$(TOOLS)/python tools/local/stack.py down

## lint: formatting, clippy, cfn-lint and sam validate (clippy twice: `--all-targets` leaves out
## the test targets marked `test = false`, the integration tests, which are named instead)
lint: $(VENV)/tools/.installed
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --locked -- -D warnings
	cargo clippy --workspace --locked $(addprefix --test ,$(INTEGRATION_TESTS)) -- -D warnings
	$(TOOLS)/cfn-lint template.yaml
	sam validate --template-file template.yaml --lint

unit:
	cargo test --workspace --locked

## integration: the tests/ crate against the deployed local stack and the sandbox (every binary
## runs even after one fails, so one run reports every failure)
INTEGRATION_TESTS := $(shell sed -n 's/^name = "\([a-z_]*\)"$$/\1/p' tests/Cargo.toml | grep -v '^integration_tests$$')
integration:
	$(LOCAL_AWS) QRSYNC_SANDBOX_URL=http://127.0.0.1:$(QRSYNC_SANDBOX_PORT) \
		cargo test --locked --workspace --no-fail-fast $(addprefix --test ,$(INTEGRATION_TESTS))

## fuzz: schemathesis against the deployed admin API, from docs/admin-api.openapi.json (a
## bounded number of cases per operation: FUZZ_EXAMPLES, seed FUZZ_SEED); see tools/fuzz/run.py
FUZZ_EXAMPLES ?= 30
FUZZ_SEED ?= 7
fuzz: $(VENV)/fuzz/.installed
	$(LOCAL_AWS) $(VENV)/fuzz/bin/python tools/fuzz/run.py --max-examples $(FUZZ_EXAMPLES) --seed $(FUZZ_SEED)

## lambda-image: the base image `sam local invoke` runs the functions in: the real one where a
## registry answers, else one built locally from pinned Debian packages (once, then reused)
lambda-image: $(VENV)/tools/.installed
	$(TOOLS)/python tools/local/lambda_image.py ensure

## invoke: one sample through `sam local invoke` against the local world, with the stack's
## resources from its outputs and the sample tenant seeded; prints the function's answer:
##   make invoke FN=CallbackFunction EVENT=events/apigw-callback-verify-url.json
## Deploys first when no stack of this checkout answers on QRSYNC_AWS_PORT, and leaves the world
## running for the next invoke (`make down` stops it).
invoke: tools
	@test -n "$(FN)" -a -n "$(EVENT)" || { echo 'usage: make invoke FN=<logical id> EVENT=events/<file>.json'; exit 2; }
	@$(TOOLS)/python tools/local/invoke.py deployed || $(MAKE) deploy
	$(TOOLS)/python tools/local/invoke.py run "$(FN)" "$(EVENT)"

## invoke-test: every file in events/ through SAM's emulator against the deployed local world,
## each answer and effect asserted (needs a Docker engine, and says so when there is none)
invoke-test: $(VENV)/tools/.installed
	$(TOOLS)/python tools/local/invoke.py test

## test: every check, against a fresh local world (any earlier one of this checkout is stopped
## first), which is stopped again afterwards. Two lanes build at once: the Python tools install
## (mostly downloads) and then `sam build` compiles the bootstraps in the dev profile
## (LAMBDA_PROFILE=dev, in target/lambda-dev), while cargo builds the unit tests, the
## integration tests and the sandbox in target/. The integration tests spend most of their time
## waiting on queues and the minute tick, so clippy, cfn-lint and sam validate run beside them at
## the lowest CPU priority, in their own target dir (cargo's lock on target/ would otherwise hold
## the integration build back); their output follows the tests'.
LINT_LOG := .local/lint-$(QRSYNC_AWS_PORT)
LAMBDA_LOG := .local/lambda-build-$(QRSYNC_AWS_PORT)
test:
	cargo fmt --all -- --check
	$(MAKE) down
	@mkdir -p .local
	( { $(MAKE) --no-print-directory tools && $(MAKE) --no-print-directory LAMBDA_PROFILE=dev build; } \
		> $(LAMBDA_LOG).log 2>&1; echo $$? > $(LAMBDA_LOG).status ) & lambdas=$$!; \
	cargo test --workspace --locked --no-run && \
	cargo test --workspace --locked --no-run $(addprefix --test ,$(INTEGRATION_TESTS)) && \
	cargo build -q --workspace --locked --bin wecom-sandbox; built=$$?; wait $$lambdas; \
	echo "--- tools and sam build (LAMBDA_PROFILE=dev), run beside the tests' build:"; \
	cat $(LAMBDA_LOG).log; [ $$built -eq 0 ] && exit $$(cat $(LAMBDA_LOG).status); exit $$built
	$(MAKE) unit
	$(MAKE) deploy-built || { $(MAKE) down; exit 1; }
	( CARGO_TARGET_DIR=$(CURDIR)/target/lint nice -n 19 $(MAKE) --no-print-directory lint \
		> $(LINT_LOG).log 2>&1; echo $$? > $(LINT_LOG).status ) & linting=$$!; \
	$(MAKE) invoke-test; invoked=$$?; $(MAKE) integration; status=$$?; \
	$(MAKE) fuzz; fuzzed=$$?; \
	wait $$linting; $(MAKE) down; \
	echo "--- lint (fmt, clippy, cfn-lint, sam validate), run beside the tests:"; cat $(LINT_LOG).log; \
	linted=$$(cat $(LINT_LOG).status); \
	[ $$invoked -ne 0 ] && exit $$invoked; [ $$status -ne 0 ] && exit $$status; \
	[ $$fuzzed -ne 0 ] && exit $$fuzzed; exit $$linted

## demo: the local world through a small campaign (tools/demo): deploys, seeds a tenant through
## the admin API, drives scans through the sandbox, prints the report, stops the world again and
## exits with the demo's status. Flags for qrsync-demo go in DEMO_ARGS (e.g. DEMO_ARGS="--seed 7").
demo: tools
	cargo build -q --locked --workspace --bin qrsync-demo
	$(MAKE) deploy || { $(MAKE) down; exit 1; }
	$(LOCAL_AWS) QRSYNC_SANDBOX_URL=http://127.0.0.1:$(QRSYNC_SANDBOX_PORT) \
		$(BIN)/qrsync-demo $(DEMO_ARGS); status=$$?; $(MAKE) down; exit $$status

## bench: a backlog of refresh reasons through the local world against lowered WeCom limits
## (tools/bench): deploys with the WeCom budget lowered to BENCH_BUDGET_PER_MINUTE (the hour's
## budget 60 times it), seeds a tenant of 2,000 codes through the admin API, drives two phases
## of staff changes (the sandbox's limit above the budget, then below it), prints the report,
## stops the world again and exits with the bench's status. Flags for qrsync-bench go in
## BENCH_ARGS (e.g. BENCH_ARGS="--seed 7"; `cargo run -p qrsync-bench -- --help` lists them).
BENCH_BUDGET_PER_MINUTE ?= 540
bench: tools
	cargo build -q --locked --workspace --bin qrsync-bench
	QRSYNC_PARAMETER_OVERRIDES="WeComBudgetPerMinute=$(BENCH_BUDGET_PER_MINUTE) WeComBudgetPerHour=$$(( $(BENCH_BUDGET_PER_MINUTE) * 60 )) $$QRSYNC_PARAMETER_OVERRIDES" \
		$(MAKE) deploy || { $(MAKE) down; exit 1; }
	$(LOCAL_AWS) QRSYNC_SANDBOX_URL=http://127.0.0.1:$(QRSYNC_SANDBOX_PORT) \
		$(BIN)/qrsync-bench $(BENCH_ARGS); status=$$?; $(MAKE) down; exit $$status

## bench-drift: the sweep measured (tools/bench/src/drift.rs): a tenant of 2,000 codes (--codes)
## seeded, DRIFT_CODES of their contact ways changed behind qrsync's back, then watched until the
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

clean: down
	rm -rf .aws-sam .local
