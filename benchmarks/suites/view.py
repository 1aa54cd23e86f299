"""``agentfly-bench --suite view``: how fast ``agentfly-view`` opens a large run.

A synthetic run of 100,000 episodes (``--quick``: 10,000) in the trainer's formats
(:func:`agentfly_view.synthetic.write_synthetic_run`: trajectories, token sidecar, metrics) is served
by the viewer on loopback, each measurement on a fresh server, so the run is indexed from nothing:

- **API, first page**: ``GET /api/episodes?limit=50`` on a server just started: the page from what is
  indexed by then (a request indexes for ``BUDGET_S`` at most; the server's thread does the rest);
- **API, all indexed**: from the server's start until ``/api/runs`` says the whole file is indexed;
- **API, later calls**: a page deep in the run, a filter (failed episodes of one env) and a text search,
  on the indexed run;
- **browser**: headless chromium (selenium, where installed) opening the episode list until its first
  50 rows are in the page, and until it counts every episode; opening the curves until they are drawn.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agentfly_view.app import create_app, serve_in_thread
from agentfly_view.runs import RunDir
from agentfly_view.synthetic import write_synthetic_run

DESCRIPTION = "agentfly-view opening a 100k-episode run: first page over the API and in headless chromium"
REPEATS = 3


def _get(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url) as response:
        response.read()
    return time.perf_counter() - started


def _indexed(url: str) -> bool:
    with urllib.request.urlopen(f"{url}/api/runs") as response:
        runs = json.loads(response.read())
    return not any(source["indexing"] for run in runs for source in run["sources"].values())


def _timed(folder: Path, until: Callable[[str], bool]) -> dict[str, float]:
    """Seconds from a fresh server's start until ``until(url)`` holds: median and max of the repeats."""
    times = []
    for _ in range(REPEATS):
        with serve_in_thread(create_app([RunDir(folder)])) as url:
            started = time.perf_counter()
            while not until(url):
                if time.perf_counter() - started > 120:
                    raise TimeoutError("the viewer did not get there in 120 s")
                time.sleep(0.01)
            times.append(time.perf_counter() - started)
    return {"s": statistics.median(times), "max_s": max(times)}


def _api(folder: Path) -> dict[str, Any]:
    first_page = []
    for _ in range(REPEATS):
        with serve_in_thread(create_app([RunDir(folder)])) as url:
            first_page.append(_get(f"{url}/api/episodes?limit=50"))
    with serve_in_thread(create_app([RunDir(folder)])) as url:
        while not _indexed(url):
            time.sleep(0.05)
        later = {
            "deep_page": _get(f"{url}/api/episodes?limit=50&offset=50000"),
            "filter": _get(f"{url}/api/episodes?limit=50&success=0&env=AgentFly/Search-v0"),
            "search": _get(f"{url}/api/episodes?limit=50&q=answer%3E1"),
            "episode": _get(f"{url}/api/episode?index=777"),
        }
    return {
        "first_page": {"s": statistics.median(first_page), "max_s": max(first_page)},
        "all_indexed": _timed(folder, _indexed),
        **{name: {"s": seconds} for name, seconds in later.items()},
    }


def _browser(folder: Path, episodes: int) -> dict[str, Any]:
    try:
        from selenium import webdriver
    except ImportError:
        return {"skipped": "selenium is not installed (the dev extra)"}
    driver_path = shutil.which("chromedriver")
    if driver_path is None:
        return {"skipped": "chromedriver is not installed (make system-deps)"}
    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver_path))
    rows = "return document.querySelectorAll('#episode-table tbody tr').length >= 50"
    counted = f"return document.getElementById('list-info').textContent.startsWith('{episodes} of {episodes} ')"
    charts = "return document.querySelectorAll('.chart canvas').length >= 4"
    views = {"first_page": ("#/episodes", rows), "all_counted": ("#/episodes", counted), "curves": ("#/curves", charts)}

    def shown(route: str, check: str) -> Callable[[str], bool]:
        def until(url: str) -> bool:
            if not driver.current_url.startswith(url):
                driver.get(f"{url}/{route}")
            return bool(driver.execute_script(check))

        return until

    try:
        driver.get("about:blank")  # the browser itself started
        return {name: _timed(folder, shown(route, check)) for name, (route, check) in views.items()}
    finally:
        driver.quit()


def run(quick: bool) -> dict[str, Any]:
    episodes = 10_000 if quick else 100_000
    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        folder = write_synthetic_run(Path(scratch) / "run", episodes)
        written = time.perf_counter() - started
        return {
            "episodes": episodes,
            "trajectories_mb": (folder / "trajectories.jsonl").stat().st_size / 1e6,
            "tokens_mb": (folder / "tokens.jsonl").stat().st_size / 1e6,
            "write_s": written,
            "api": _api(folder),
            "browser": _browser(folder, episodes),
        }


def render(results: dict[str, Any], console: Console) -> None:
    table = Table(
        title=f"agentfly-view on a synthetic run of {results['episodes']:,} episodes "
        f"(trajectories {results['trajectories_mb']:.0f} MB, tokens {results['tokens_mb']:.0f} MB); "
        f"fresh server each, median (max) of {REPEATS}"
    )
    table.add_column("what")
    table.add_column("seconds", justify="right")
    rows = [
        ("api", "first_page", "API: first page, server just started"),
        ("api", "all_indexed", "API: the whole run indexed"),
        ("api", "deep_page", "API: page at episode 50,000"),
        ("api", "filter", "API: failed episodes of one env"),
        ("api", "search", "API: text search"),
        ("api", "episode", "API: one episode with its tokens"),
        ("browser", "first_page", "browser: episode list, first 50 rows shown"),
        ("browser", "all_counted", "browser: episode list, every episode counted"),
        ("browser", "curves", "browser: curves drawn"),
    ]
    for group, name, label in rows:
        measured = results[group].get(name)
        if measured is None:
            continue
        spread = f" ({measured['max_s']:.3f})" if "max_s" in measured else ""
        table.add_row(label, f"{measured['s']:.3f}{spread}")
    if "skipped" in results["browser"]:
        table.add_row("browser", results["browser"]["skipped"])
    console.print(table)
