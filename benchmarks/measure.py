"""Measuring helpers: latency summaries and the memory of a process tree (read from /proc)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np


def summarize(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99/mean of latencies, in microseconds (``n`` is the sample count)."""
    if not seconds:
        return {"n": 0}
    values = np.asarray(seconds, dtype=np.float64) * 1e6
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {
        "n": len(values),
        "p50_us": float(p50),
        "p90_us": float(p90),
        "p99_us": float(p99),
        "mean_us": float(values.mean()),
    }


def proc_kib(pid: int | str, field: str = "VmRSS", table: str = "status") -> int:
    """A memory figure of a process from ``/proc/<pid>/<table>`` in KiB (``pid`` may be ``"self"``):
    ``VmRSS``, ``VmHWM``, ``RssAnon`` from ``status``, ``Pss`` from ``smaps_rollup``; 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/{table}").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            # The command name may hold spaces or parentheses; the parent pid follows the last ')'.
            stat = Path(entry.path, "stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def memory_mib(pid: int | None = None) -> dict[str, float]:
    """Resident memory of a process and, separately, of all its descendants (backend processes)."""
    pid = os.getpid() if pid is None else pid
    below = descendants(pid)
    return {
        "self_mib": proc_kib(pid) / 1024,
        "backends_mib": sum(proc_kib(child) for child in below) / 1024,
        "backend_processes": len(below),
    }


def time_calls(function: Callable[[], object], repeats: int) -> list[float]:
    """Wall time of each of ``repeats`` calls, in seconds."""
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        samples.append(time.perf_counter() - started)
    return samples
