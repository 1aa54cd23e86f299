"""``agentfly-bench``: standalone environment benchmarking, JSON plus a readable table.

Examples::

    agentfly-bench                         # the core suite and every registered env
    agentfly-bench AgentFly/Math-v0 --concurrency 1 8 64 256 --compare gym-sync gym-async
    agentfly-bench --suite core --json bench.json
    agentfly-bench --suite webshop         # an env-specific suite from agentfly_bench.suites
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import agentfly_env
from agentfly_bench.baselines import BASELINES
from agentfly_bench.core_suite import run_core
from agentfly_bench.env_suite import run_env
from agentfly_bench.suites import available as available_suites


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="agentfly-bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("env_ids", nargs="*", help="env ids to benchmark (default: all registered)")
    suites = available_suites()
    parser.add_argument(
        "--suite",
        choices=["core", "envs", "all", *suites],
        default="all",
        help="all = core + envs; " + "; ".join(f"{name}: {module.DESCRIPTION}" for name, module in suites.items()),
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 64, 256])
    parser.add_argument("--steps", type=int, default=5_000, help="env steps per throughput measurement")
    parser.add_argument(
        "--compare", nargs="*", default=[], choices=sorted(BASELINES), help="baselines to run in the same call"
    )
    parser.add_argument(
        "--env-kwargs", type=json.loads, default={}, help="JSON passed to gym.make, e.g. '{\"difficulty\": 1}'"
    )
    parser.add_argument(
        "--json", type=Path, default=Path("bench-results/bench.json"), help="where to write the JSON results"
    )
    parser.add_argument("--quick", action="store_true", help="fewer repeats and smaller sizes (a smoke run)")
    parser.add_argument(
        "--suite-options",
        type=json.loads,
        default={},
        help="JSON keyword arguments for the --suite module's run(), e.g. '{\"duration_s\": 900}' for chaos",
    )
    args = parser.parse_args(argv)
    unknown = [env_id for env_id in args.env_ids if env_id not in agentfly_env.registered_ids()]
    if unknown:
        parser.error(f"unknown env ids {unknown}; registered: {agentfly_env.registered_ids()}")
    return args


def render(results: dict[str, Any], console: Console) -> None:
    core = results.get("core")
    if core:
        table = Table(title="Framework overhead (µs)")
        for column in ("measure", "p50", "p90", "p99", "mean"):
            table.add_column(column, justify="right" if column != "measure" else "left")
        for name, stats in core.items():
            table.add_row(name, *(f"{stats[key]:.1f}" for key in ("p50_us", "p90_us", "p99_us", "mean_us")))
        console.print(table)
    for env_id, env in results.get("envs", {}).items():
        table = Table(title=f"{env_id}: latency (ms)")
        for column in ("call", "p50", "p90", "p99"):
            table.add_column(column, justify="right" if column != "call" else "left")
        for call in ("reset", "step"):
            stats = env[call]
            table.add_row(call, *(f"{stats[key] / 1000:.3f}" for key in ("p50_us", "p90_us", "p99_us")))
        console.print(table)
        names = sorted({name for row in env["throughput"].values() for name in row}, key=lambda n: n != "agentfly")
        table = Table(title=f"{env_id}: steps/s by number of concurrent envs")
        table.add_column("envs", justify="right")
        for name in names:
            table.add_column(name, justify="right")
        for name in names[1:]:
            table.add_column(f"ours / {name}", justify="right")
        for level, row in env["throughput"].items():
            ratios = [f"{row['agentfly'] / row[name]:.1f}x" for name in names[1:]]
            table.add_row(level, *(f"{row[name]:,.0f}" for name in names), *ratios)
        console.print(table)
        memory = env["memory"]
        console.print(
            f"memory: this process {memory['self_mib']:.0f} MiB, {memory['backend_processes']} backend processes "
            f"{memory['backends_mib']:.0f} MiB; pools: {env['pools'] or 'none'}"
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Move everything imported so far (numpy, sympy via reasoning-gym, ...) out of the collector's
    # reach, as long-running trainers do; otherwise full collections rescan millions of library
    # objects and the numbers measure the garbage collector. Baselines run in this process too.
    gc.collect()
    gc.freeze()
    try:
        return run(args)
    finally:
        gc.unfreeze()


def machine() -> dict[str, Any]:
    """What ran the suite: Python, the platform, the CPU's model name and its count of CPUs.

    Example:
        >>> sorted(machine())
        ['cpu', 'cpus', 'platform', 'python']
    """
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            cpu = next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"python": sys.version.split()[0], "platform": platform.platform(), "cpu": cpu, "cpus": os.cpu_count()}


def commit() -> str | None:
    """The checkout's commit, ``+dirty`` when tracked files differ from it; None outside a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, check=True)
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return head.stdout.strip() + ("+dirty" if changed.stdout.strip() else "")


def run(args: argparse.Namespace) -> int:
    console = Console(width=None if sys.stdout.isatty() else 120)  # logs are not 80 columns wide
    results: dict[str, Any] = {
        "machine": machine(),
        "commit": commit(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "args": {key: (str(value) if isinstance(value, Path) else value) for key, value in vars(args).items()},
    }
    if args.suite in ("core", "all"):
        with console.status("core suite"):
            results["core"] = run_core(quick=args.quick)
    if args.suite in ("envs", "all"):
        results["envs"] = {}
        steps = min(args.steps, 500) if args.quick else args.steps
        for env_id in args.env_ids or agentfly_env.registered_ids():
            with console.status(f"{env_id}"):
                results["envs"][env_id] = run_env(
                    env_id, concurrency=args.concurrency, steps=steps, compare=args.compare, env_kwargs=args.env_kwargs
                )
    suites = available_suites()
    if args.suite in suites:
        with console.status(args.suite):
            results[args.suite] = suites[args.suite].run(quick=args.quick, **args.suite_options)
    render(results, console)
    if args.suite in suites:
        suites[args.suite].render(results[args.suite], console)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2))
    console.print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
