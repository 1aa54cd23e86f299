"""What ``agentfly-train`` prints: its own lines (one per training step, the stages of a run) and, unless
``--verbose``, nothing of what the libraries under it log at INFO or warn about.

The libraries read their settings when they are imported, some in processes of their own (vLLM's engine
process), so :func:`quiet_libraries` sets environment variables and must run before anything heavy is
imported: vLLM honours ``VLLM_LOGGING_LEVEL`` (``VLLM_CONFIGURE_LOGGING=0`` would drop its handler
altogether, and with it its warnings' format), torch's C++ side ``TORCH_CPP_LOG_LEVEL`` (the NUMA
binding notice), transformers' and huggingface_hub's progress bars ``HF_HUB_DISABLE_PROGRESS_BARS``;
Python warnings raised in third-party modules are ignored (``PYTHONWARNINGS`` for child processes).

Example:
    >>> from rich.console import Console
    >>> report = StepReport(Console(width=200), total=2, bar=False)
    >>> report(1, {"reward_mean": 0.5, "success_rate": 0.25, "tool_calls_per_episode": 1.0,
    ...            "rollout_wall_s": 3.04, "update_s": 5.2})
    step 1/2: reward 0.500, success 0.25, tool calls 1.00 per episode, rollout 3.0 s, update 5.2 s
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

#: Loggers of the libraries under the trainer, and the level they are kept at. vLLM's CPU build warns about its
#: own set-up on every engine (thread binding, tcmalloc, Triton, rotary weights at every weight reload): nothing a
#: user can act on, so it is kept at ERROR; ``--verbose`` shows it all.
LIBRARY_LEVELS: dict[str, int] = {
    "vllm": logging.ERROR,
    "transformers": logging.WARNING,
    "torch": logging.WARNING,
    "ray": logging.WARNING,
    "urllib3": logging.WARNING,
    "httpx": logging.WARNING,
    "huggingface_hub": logging.WARNING,
    "filelock": logging.WARNING,
    "matplotlib": logging.WARNING,
    "asyncio": logging.WARNING,
}
#: The trainer's own loggers (``agentfly.train``, ...): their INFO lines are the run's story.
OWN_LOGGER = "agentfly"


def quiet_libraries() -> None:
    """Keep third-party logs at :data:`LIBRARY_LEVELS` and their Python warnings silent (ours still show).
    Run it before torch, transformers or vLLM is imported; settings already in the environment win."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", logging.getLevelName(LIBRARY_LEVELS["vllm"]))
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("PYTHONWARNINGS", "ignore")  # child processes: vLLM's engine, ...
    warnings.filterwarnings("ignore")
    warnings.filterwarnings("default", module=OWN_LOGGER)
    for name, level in LIBRARY_LEVELS.items():
        logging.getLogger(name).setLevel(level)


class ConsoleHandler(logging.Handler):
    """The trainer's log records as plain lines on the run's console (above a live progress bar)."""

    def __init__(self, console: Console) -> None:
        super().__init__(logging.INFO)
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        prefix = "" if record.levelno < logging.WARNING else f"{record.levelname.lower()}: "
        self.console.print(prefix + record.getMessage(), markup=False, highlight=False, emoji=False, soft_wrap=True)


def show_own_logs(console: Console) -> None:
    """Print the trainer's INFO records (``agentfly.*``) on ``console``, replacing an earlier call's handler."""
    own = logging.getLogger(OWN_LOGGER)
    for handler in [h for h in own.handlers if isinstance(h, ConsoleHandler)]:
        own.removeHandler(handler)
    own.addHandler(ConsoleHandler(console))
    own.setLevel(logging.INFO)
    own.propagate = False


def make_console() -> Console:
    """The run's console: the terminal's width, or 120 columns for a log file or a pipe."""
    return Console(width=None if sys.stdout.isatty() else 120)


class StepReport:
    """One line per training step, passed to a backend's ``fit`` as ``on_step``; with ``bar``, a progress bar
    below the lines too (started at the first step: a backend that reports none shows none).

    Args:
        console: Where the lines go.
        total: The run's steps.
        bar: Show the progress bar (for a terminal).
    """

    def __init__(self, console: Console, total: int, *, bar: bool) -> None:
        self.console = console
        self.total = total
        self.bar = bar
        self._progress: Progress | None = None

    def __call__(self, step: int, metrics: dict[str, Any]) -> None:
        line = (
            f"step {step}/{self.total}: reward {metrics['reward_mean']:.3f}, success {metrics['success_rate']:.2f}, "
            f"tool calls {metrics['tool_calls_per_episode']:.2f} per episode, "
            f"rollout {metrics['rollout_wall_s']:.1f} s, update {metrics['update_s']:.1f} s"
        )
        if metrics.get("left_out_episodes"):
            line += f"; {metrics['left_out_episodes']} episodes left out of the update (they failed)"
        if reasons := metrics.get("failure_reasons"):
            line += "; failed: " + "; ".join(f"{count} x {reason}" for reason, count in reasons.items())
        if "self_imitation_episodes" in metrics:  # a step that ended with a fine-tune (sft.self_imitation_every)
            wins = metrics["self_imitation_episodes"]
            line += (
                f"; self-imitation on {wins} wins, {metrics['self_imitation_s']:.1f} s"
                if wins
                else "; self-imitation: no wins since the last, nothing trained"
            )
        self.console.print(line, markup=False, highlight=False, emoji=False, soft_wrap=True)
        if not self.bar:
            return
        if self._progress is None:
            self._progress = Progress(
                TextColumn("[bold]train"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=self.console,
            )
            self._task = self._progress.add_task("train", total=self.total)
            self._progress.start()
        self._progress.update(self._task, completed=step)

    def __enter__(self) -> StepReport:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
