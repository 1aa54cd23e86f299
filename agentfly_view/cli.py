"""``agentfly-view``: a local web page over run directories.

Examples::

    agentfly-view runs/calculator                     # one training run
    agentfly-view runs/grpo runs/rloo                 # two, overlaid in the curves
    agentfly-view                                     # every run under ./runs
    agentfly-view runs/play --port 9000 --host 0.0.0.0 --allow-remote   # other machines too (no auth!)

It binds to the loopback interface and answers only requests addressed to it, from no web page of
another origin (:mod:`agentfly_env.serve.guard`): the page shows everything in the runs, so exposing it
(``--host`` with ``--allow-remote``) is a choice to make on purpose.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from agentfly_env.serve.guard import add_guard_arguments, bind_refusal, rules_from_arguments
from agentfly_view.runs import METRICS_FILE, TRAJECTORIES_FILE, RunDir

DEFAULT_PORT = 8600


def find_runs(folder: Path) -> list[Path]:
    """The folders directly under ``folder`` that look like runs (metrics or trajectories inside)."""
    if not folder.is_dir():
        return []
    return sorted(
        child
        for child in folder.iterdir()
        if child.is_dir() and ((child / METRICS_FILE).exists() or any(child.glob(f"**/{TRAJECTORIES_FILE}")))
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agentfly-view", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", type=Path, help="run directories (default: every run under ./runs)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: loopback only)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    add_guard_arguments(parser)
    args = parser.parse_args(argv)
    refusal = bind_refusal("agentfly-view", args.host, args.allow_remote)
    if refusal:
        parser.error(refusal)

    folders = args.runs or find_runs(Path("runs"))
    if not folders:
        parser.error("no run directories given and none found under ./runs")
    missing = [str(folder) for folder in folders if not folder.exists()]
    if missing:
        parser.error(f"not found: {', '.join(missing)}")

    import uvicorn

    from agentfly_view.app import create_app

    app = create_app([RunDir(folder) for folder in folders], rules_from_arguments(args))
    print(f"agentfly-view: http://{args.host}:{args.port}/  ({len(folders)} run(s); Ctrl-C stops)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
