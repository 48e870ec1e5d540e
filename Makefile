# iofleet: the two commands are `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.PHONY: demo test bootstrap layer tools test-tools lint test-unit test-infra test-integration test-cloud synth bench clean

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -r requirements-dev.txt
	$(BIN)/pip install -q --no-deps -e .
	@touch $@

# fio and ioping run the benchmarks; the test suites also need shellcheck
# (user-data checks) and mkfs.xfs (the agent's default filesystem on loop devices);
# the device guard's probe set makes every kind of device it must refuse (btrfs, LVM,
# md, LUKS, swap, partition tables) and asks libblkid (blkid/wipefs, util-linux);
# chromium opens the HTML report headless to check its charts draw
RUN_TOOLS := fio ioping
TEST_TOOLS := $(RUN_TOOLS) shellcheck mkfs.xfs:xfsprogs mkfs.ext4:e2fsprogs blkid:util-linux \
	mkfs.btrfs:btrfs-progs pvcreate:lvm2 mdadm cryptsetup:cryptsetup-bin sfdisk:fdisk \
	chromium strace

# npm tools from the committed lockfile: the pinned CDK CLI (`npx cdk ...`) and
# asl-validator for the infra gates
NODE_STAMP := node_modules/.package-lock.json
$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error

# the Summarize Lambda's numpy + scipy layer: cp314 manylinux x86_64 wheels from PyPI,
# hash-pinned, trimmed, zipped to .layers/stats.zip (infra/stats_layer.py; generated, not committed)
LAYER_STAMP := .layers/stats.zip
$(LAYER_STAMP): requirements-layer-stats.txt infra/stats_layer.py $(STAMP)
	$(BIN)/python -m infra.stats_layer build

layer: $(LAYER_STAMP)

bootstrap: $(STAMP) tools $(NODE_STAMP) $(LAYER_STAMP)

# the template security scanner, in a venv of its own (checkov pins many packages)
SCAN_STAMP := .venv-scan/.installed-stamp
$(SCAN_STAMP): requirements-scan.txt
	@test -x .venv-scan/bin/python || $(PYTHON) -m venv .venv-scan
	.venv-scan/bin/pip install -q -r requirements-scan.txt
	@touch $@

tools:
	@scripts/ensure-tools.sh $(RUN_TOOLS)

test-tools:
	@scripts/ensure-tools.sh $(TEST_TOOLS)

demo: bootstrap
	$(BIN)/iofleet local examples/local-demo.json --out demo-out

lint: $(STAMP)
	$(BIN)/ruff check iofleet lambdas infra tests bench scripts app.py
	$(BIN)/mypy

test: bootstrap test-tools $(NODE_STAMP) $(SCAN_STAMP)
	$(BIN)/ruff check iofleet lambdas infra tests bench scripts app.py
	$(BIN)/mypy
	$(BIN)/pytest tests/unit tests/integration
	$(BIN)/pytest tests/infra
	$(BIN)/python scripts/engines/engines.py install
	$(BIN)/pytest tests/cloud

test-infra: $(STAMP) $(LAYER_STAMP) test-tools $(NODE_STAMP) $(SCAN_STAMP)
	$(BIN)/pytest tests/infra

test-unit: $(STAMP)
	$(BIN)/pytest tests/unit

test-integration: bootstrap test-tools
	$(BIN)/pytest tests/integration

# Local cloud: moto, DynamoDB Local, Trino (Maven Central, cached in .engines/); see docs/local-cloud.md
test-cloud: $(STAMP) $(LAYER_STAMP)
	$(BIN)/python scripts/engines/engines.py install
	$(BIN)/pytest tests/cloud

synth: $(STAMP) $(LAYER_STAMP)
	$(BIN)/python app.py

# Measure iofleet itself (< 15 min): bench/results/latest.json + the table in docs/benchmarks.md
bench: bootstrap
	$(BIN)/python scripts/engines/engines.py install
	$(BIN)/python -m bench.run

clean:
	rm -rf cdk.out node_modules demo-out .layers .venv-scan .pytest_cache .ruff_cache .mypy_cache
