"""``agentfly-train``: train, evaluate, or export tasks, from one TOML config plus flags.

Examples::

    agentfly-train --config quickstart                      # GRPO on SmolLM2-135M, a few minutes on a CPU
    agentfly-train --algo rloo --env AgentFly/Math-v0 --env-option difficulty=1 --steps 50
    agentfly-train --config my.toml --set train.lr=2e-6 --set rollout.max_turns=6 --resume auto
    agentfly-train eval --model runs/train/final --episodes 200
    agentfly-train --config agent-calculator --agent examples/calculator_agent.py:solve   # your own agent program
    agentfly-train eval --agent-command "python my_app/agent.py" --model runs/train/final   # ... or executable
    agentfly-train eval --base-url http://gpu-box:8000/v1 --server-model Qwen/Qwen2.5-7B-Instruct
    agentfly-train export --count 10000 --output prompts.jsonl   # prompt file for OpenRLHF
    agentfly-train --config openrlhf --dry-run                   # the OpenRLHF command for 8 GPUs, printed
    agentfly-train --config openrlhf --ray-address http://head:8265   # ... submitted to a Ray cluster

Flags override the config file; ``--set section.field=value`` reaches any field (see
``agentfly_train/config.py``). The config is checked before torch or transformers load, so a
mistake (an unknown env or algo, a missing model) is reported at once.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentfly_train.config import (
    ALGORITHMS,
    BACKENDS,
    GENERATORS,
    Config,
    ConfigError,
    apply_overrides,
    preset_names,
)
from agentfly_train.console import make_console, quiet_libraries, show_own_logs
from agentfly_train.run_files import FINAL_MODEL_DIR

COMMANDS = ("train", "eval", "export", "collect", "sft")

#: Flag destination -> config field, for the flags that name a field directly.
FIELD_FLAGS = {
    "backend": "backend",
    "algo": "algo",
    "seed": "seed",
    "out": "out_dir",
    "env": "env.id",
    "model": "model.path",
    "model_cache": "model.cache_dir",
    "device": "model.device",
    "threads": "model.threads",
    "steps": "train.steps",
    "lr": "train.lr",
    "resume": "train.resume",
    "prompts_per_step": "rollout.prompts_per_step",
    "samples_per_prompt": "rollout.samples_per_prompt",
    "max_turns": "rollout.max_turns",
    "max_new_tokens": "rollout.max_new_tokens",
    "max_episode_tokens": "rollout.max_episode_tokens",
    "temperature": "rollout.temperature",
    "generator": "rollout.generator",
    "episodes": "eval.episodes",
    "base_url": "eval.base_url",
    "server_model": "eval.server_model",
    "eval_temperature": "eval.temperature",
    "concurrency": "eval.concurrency",
    "ray_address": "openrlhf.ray_address",
    "agent": "agent.program",
    "agent_command": "agent.command",
}


def build_parser(command: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentfly-train" if command == "train" else f"agentfly-train {command}",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if command == "train":
        parser.add_argument(
            "command", nargs="?", choices=COMMANDS, help="train (default), eval, export, collect or sft"
        )
    parser.add_argument("--config", help=f"a TOML file, or a preset name ({', '.join(preset_names())})")
    parser.add_argument("--env", help="env id, e.g. AgentFly/Math-v0")
    parser.add_argument(
        "--env-option", action="append", default=[], metavar="KEY=VALUE", help="an env option (repeatable)"
    )
    parser.add_argument("--out", help="run directory (metrics, trajectories, checkpoints, plot)")
    parser.add_argument("--seed", type=int)
    parser.add_argument(
        "--set", action="append", default=[], metavar="SECTION.FIELD=VALUE", help="override any config field"
    )
    parser.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    parser.add_argument(
        "--verbose", action="store_true", help="show the libraries' own logs and warnings (vLLM, transformers, ...)"
    )
    if command in ("train", "eval", "sft"):
        parser.add_argument("--model", help="smollm2-135m (bundled), a model folder, a .gguf file or a hub id")
        parser.add_argument("--model-cache", help="where converted GGUF models are kept")
        parser.add_argument("--device", choices=["auto", "cpu", "cuda"])
        parser.add_argument("--threads", type=int, help="torch CPU threads (0: torch's default)")
        parser.add_argument("--max-turns", type=int)
        parser.add_argument("--max-new-tokens", type=int, help="token budget of one model turn")
        parser.add_argument("--max-episode-tokens", type=int, help="token budget of a whole episode")
        parser.add_argument(
            "--agent",
            metavar="PATH.py:FUNC",
            help="an agent program, FUNC(task, llm), played through the token-exact gateway instead of the env loop",
        )
        parser.add_argument(
            "--agent-command",
            metavar="CMD",
            help="an agent as an executable, run once per episode: endpoints in OPENAI_BASE_URL, ANTHROPIC_BASE_URL, "
            "... and the task on stdin; its last printed line is the answer",
        )
    if command == "train":
        parser.add_argument("--backend", choices=BACKENDS)
        parser.add_argument("--algo", choices=list(ALGORITHMS))
        parser.add_argument("--steps", type=int)
        parser.add_argument("--lr", type=float)
        parser.add_argument("--prompts-per-step", type=int)
        parser.add_argument("--samples-per-prompt", type=int, help="chains per task (the GRPO/RLOO group)")
        parser.add_argument("--temperature", type=float)
        parser.add_argument("--generator", choices=GENERATORS)
        parser.add_argument("--resume", nargs="?", const="auto", help="continue from the latest checkpoint, or a path")
        parser.add_argument("--wandb", action="store_true", help="also log to Weights & Biases")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar, only a line per step")
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="prepare and print what the backend would run, run nothing (openrlhf: the prompt files and the command)",
        )
        parser.add_argument("--ray-address", help="openrlhf backend: submit to this Ray cluster (http://head:8265)")
    if command == "eval":
        parser.add_argument("--episodes", type=int)
        parser.add_argument("--base-url", help="an OpenAI-compatible server, e.g. http://host:8000/v1")
        parser.add_argument("--server-model", help="the model name the server serves")
        parser.add_argument("--temperature", dest="eval_temperature", type=float, help="0 is greedy")
        parser.add_argument("--concurrency", type=int)
        parser.add_argument(
            "--split", choices=["train", "eval"], default="eval", help="the eval options, or the training ones"
        )
    if command == "collect":
        parser.add_argument("--output", required=True, help="the JSONL file of trajectories to write")
        parser.add_argument("--episodes", type=int, default=100)
        parser.add_argument("--split", choices=["train", "eval"], default="train")
    if command == "sft":
        parser.add_argument(
            "--data", action="append", default=[], help="a JSONL file of demonstrations (repeatable): sft.data"
        )
        parser.add_argument("--epochs", type=int)
        parser.add_argument("--lr", dest="sft_lr", type=float, help="the warm start's learning rate: sft.lr")
    if command == "export":
        parser.add_argument("--output", required=True, help="the JSONL file to write")
        parser.add_argument("--count", type=int, default=1000)
        parser.add_argument("--split", choices=["train", "eval"], default="train")
    return parser


def resolve_config(args: argparse.Namespace) -> Config:
    """The config file (or defaults), then the flags, then ``--set`` overrides."""
    config = Config.load(args.config) if args.config else Config()
    overrides = [
        f"{field}={_literal(getattr(args, dest))}"
        for dest, field in FIELD_FLAGS.items()
        if getattr(args, dest, None) is not None
    ]
    # One agent flag names the run's agent: it replaces the config's other kind (both flags: an error, later).
    for flag, other in (("agent", "agent.command"), ("agent_command", "agent.program")):
        if getattr(args, flag, None) is not None:
            overrides.insert(0, f'{other}=""')
    overrides += [f"env.options.{option}" for option in args.env_option]
    if getattr(args, "data", None):
        overrides.append(f"sft.data={json.dumps(args.data)}")
    if getattr(args, "epochs", None) is not None:
        overrides.append(f"sft.epochs={args.epochs}")
    if getattr(args, "sft_lr", None) is not None:
        overrides.append(f"sft.lr={args.sft_lr}")
    if getattr(args, "wandb", False):
        overrides.append("log.wandb=true")
    if getattr(args, "no_progress", False):
        overrides.append("log.progress=false")
    return apply_overrides(config, overrides + args.set)


def _literal(value: Any) -> str:
    """A flag value as the TOML literal the override parser reads back."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def main(argv: Sequence[str] | None = None) -> int:
    """``agentfly-train``. A terminated run (SIGTERM) exits as an interrupted one does, so its cleanup runs: its
    agent commands' process groups, its engines, its env actors."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may take a signal
        return _main(argv)
    previous = signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        return _main(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _exit_on_signal(number: int, frame: Any) -> None:
    raise SystemExit(128 + number)


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv and argv[0] in COMMANDS else "train"
    parser = build_parser(command)
    args = parser.parse_args(argv[1:] if command != "train" else argv)
    if not args.verbose:
        quiet_libraries()  # before torch, transformers or vLLM is imported
    console = make_console()
    show_own_logs(console)
    # OpenMP threads that spin while waiting make a shared CPU crawl; passive waiting costs nothing.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        config = resolve_config(args)
        if args.print_config:
            print(json.dumps(config.to_dict(), indent=2))
            return 0
        dry_run = getattr(args, "dry_run", False)
        config.validate(
            check_model=command not in ("export", "collect") and not dry_run, training=command in ("train", "sft")
        )
        if command == "sft" and not config.sft.enabled:
            raise ConfigError("sft needs demonstrations: --data FILE (or sft.data / sft.expert_episodes in the config)")
        if command == "eval" and args.split == "train":
            config.env.eval_options = {}
        # The backend is built here: what it checks (installed packages, paths) is a config error too.
        backend = _build_backend(console, config, dry_run=dry_run) if command == "train" else None
    except ConfigError as error:
        parser.error(str(error))
    if backend is not None:
        return _train(console, config, backend)
    if command == "eval":
        return _evaluate(console, config)
    if command == "collect":
        return _collect(config, args)
    if command == "sft":
        return _sft(config)
    if command == "export":
        from agentfly_train.dataset import export_tasks

        count = export_tasks(config, args.output, count=args.count, split=args.split)
        print(f"wrote {count} tasks of {config.env.id} to {args.output}")
    return 0


def _collect(config: Config, args: argparse.Namespace) -> int:
    from agentfly_train.sft import collect_expert, write_jsonl

    options = {**config.env.options, **(config.env.eval_options if args.split == "eval" else {})}
    count = write_jsonl(
        collect_expert(config.env.id, args.episodes, options=options, first_seed=config.seed), args.output
    )
    print(f"wrote {count} expert episodes of {config.env.id} to {args.output}")
    return 0


def _sft(config: Config) -> int:
    """The ``[sft]`` stage alone: the warm-started model goes to ``<out_dir>/final``."""
    from agentfly_env.resources.files import atomic_path
    from agentfly_train.lifecycle import load_policy
    from agentfly_train.sft import warm_start

    model, tokenizer = load_policy(config)
    result = warm_start(config, model, tokenizer)
    final = Path(config.out_dir) / FINAL_MODEL_DIR
    with atomic_path(final) as scratch:  # a crash leaves no half-saved model behind
        model.save_pretrained(scratch)
        tokenizer.save_pretrained(scratch)
    print(
        f"sft: {result.episodes} episodes ({result.action_tokens} model tokens), {len(result.losses)} steps in "
        f"{result.seconds:.0f} s; loss {result.losses[0]:.3f} -> {result.losses[-1]:.3f}; model: {final}"
    )
    return 0


def _build_backend(console: Any, config: Config, *, dry_run: bool) -> Any:
    from agentfly_train.backends import build_backend

    with console.status(f"{config.backend} backend: preparing {config.model.path} on {config.env.id}"):
        return build_backend(config, dry_run=dry_run)


def _train(console: Any, config: Config, backend: Any) -> int:
    from agentfly_train.console import StepReport

    started = time.perf_counter()
    print(backend.describe(), flush=True)  # plain: a launcher's is a command line to copy
    with StepReport(console, config.train.steps, bar=config.log.progress and console.is_terminal) as report:
        summary = backend.fit(on_step=report)
    if "steps" in summary:
        _print_summary(console, summary, time.perf_counter() - started)
    return int(summary.get("exit_code", 0))


def _print_summary(console: Any, summary: dict[str, Any], wall_s: float) -> None:
    from rich.table import Table

    table = Table(title="training run", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    if "reward_first" in summary:
        table.add_row(
            "reward", f"{summary['reward_first']:.3f} at the first step -> {summary['reward_last']:.3f} at the last"
        )
    table.add_row("steps", f"{summary['steps']} in {wall_s:.0f} s (including model loading)")
    for key, label in [
        ("reward_curve", "reward curve"),
        ("metrics", "metrics (JSONL)"),
        ("trajectories", "trajectories"),
        ("tensorboard", "TensorBoard"),
        ("checkpoint", "checkpoint (--resume)"),
        ("final_model", "final model (--model)"),
    ]:
        if key in summary:
            table.add_row(label, summary[key])
    console.print(table)
    if "metrics" in summary:  # the web page over the run: curves, episodes, tokens
        console.print(f"view it: agentfly-view {Path(summary['metrics']).parent}", markup=False, soft_wrap=True)
    if "stages" in summary:
        stages = Table(title="held-out tasks (eval split), greedy")
        for column in ("stage", "success", "reward", "tool calls / episode", "turns / episode"):
            stages.add_column(column, justify="left" if column == "stage" else "right")
        for stage, row in summary["stages"].items():
            envs = sorted({key.rpartition("/")[0] for key in row if "/" in key})  # a mixed run's envs
            for label, prefix in [(stage, ""), *((f"  {stage}: {env}", f"{env}/") for env in envs)]:
                stages.add_row(
                    label,
                    f"{row[prefix + 'success_rate']:.3f}",
                    f"{row[prefix + 'reward_mean']:.3f}",
                    f"{row[prefix + 'tool_calls_per_episode']:.2f}",
                    f"{row[prefix + 'turns_per_episode']:.2f}",
                )
        console.print(stages)


def _evaluate(console: Any, config: Config) -> int:
    from rich.table import Table

    from agentfly_train.evaluate import evaluate

    with console.status(f"evaluating on {config.eval.episodes} episodes of {config.env.id}"):
        summary = evaluate(config)
    table = Table(title=f"{summary['model']} on {summary['env']} ({summary['episodes']} episodes)", show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    for key in (
        "success_rate",
        "reward_mean",
        "turns_per_episode",
        "tool_calls_per_episode",
        "errors_per_episode",
        "truncated_rate",
    ):
        table.add_row(key.replace("_", " "), f"{summary[key]:.3f}")
    for key in sorted(key for key in summary if key.endswith(("/success_rate", "/reward_mean"))):  # a mixed run
        table.add_row(key.replace("_", " "), f"{summary[key]:.3f}")
    table.add_row("wall time", f"{summary['wall_s']:.1f} s")
    console.print(table)
    console.print(f"trajectories: {summary['trajectories']}\nsummary: {summary['summary_file']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
