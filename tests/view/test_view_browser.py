"""The viewer end to end in a real headless browser (Debian's chromium through selenium): a real training
run's failed episodes filtered, one opened, its tokens coloured by exactly the mask the trainer trained
with; an agent program's episode row by row, its prefix mismatch marked; curves of two runs overlaid;
damaged lines counted on the page; a growing run refreshed live; each tool's calls, failures and latency.

The episode page's screenshot is saved in the test's tmp dir and copied to runs/view-screenshot.png, the
per-tool panel's to runs/view-tools-screenshot.png.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgspec
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from agentfly_env.core.recording import read_trajectories
from agentfly_env.core.types import tool_stats
from agentfly_train.run_files import TRAJECTORIES_FILE
from agentfly_view.app import create_app, serve_in_thread
from agentfly_view.runs import RunDir
from agentfly_view.synthetic import write_synthetic_run

SCREENSHOT_COPY = Path(__file__).parents[2] / "runs" / "view-screenshot.png"
TOOLS_SCREENSHOT_COPY = SCREENSHOT_COPY.with_name("view-tools-screenshot.png")


def wait(browser, condition, timeout: float = 30):
    return WebDriverWait(browser, timeout).until(lambda driver: condition(driver))


def test_a_failed_episode_shows_the_mask_it_was_trained_with(browser, trained_run, tmp_path):
    out, played = trained_run
    with serve_in_thread(create_app([RunDir(out)])) as url:
        browser.get(f"{url}/#/episodes")
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#episode-table tbody tr"))
        Select(browser.find_element(By.ID, "f-success")).select_by_value("0")
        browser.find_element(By.ID, "f-apply").click()
        failed = [e for e in played.values() if not e.success]
        assert failed
        results = (
            "return [...document.querySelectorAll('#episode-table tbody td:nth-child(6)')].map(td => td.textContent)"
        )
        wait(browser, lambda d: "success=0" in d.current_url and d.execute_script(results) == ["failed"] * len(failed))
        browser.find_element(By.CSS_SELECTOR, "#episode-table tbody tr").click()
        tokens = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#tokens .tok"))
        episode = played[browser.find_element(By.ID, "episode-id").text]
        assert not episode.success
        shown = browser.execute_script(
            "return [...document.querySelectorAll('#tokens .tok')].map(t => [Number(t.dataset.mask), t.dataset.logprob ?? null])"
        )
        assert [mask for mask, _ in shown] == episode.action_mask and len(tokens) == len(episode.token_ids)
        generated = [lp for lp, bit in zip(episode.logprobs, episode.action_mask, strict=True) if bit]
        assert [float(lp) for mask, lp in shown if mask] == pytest.approx(generated, abs=1e-4)
        assert len(browser.find_elements(By.CSS_SELECTOR, ".turn")) == episode.model_turns
        browser.set_window_size(1400, 1600)  # the whole episode: its turns and tokens
        screenshot = tmp_path / "view-episode.png"
        assert browser.save_screenshot(str(screenshot)) and screenshot.stat().st_size > 10_000
        SCREENSHOT_COPY.parent.mkdir(exist_ok=True)
        shutil.copyfile(screenshot, SCREENSHOT_COPY)
        browser.set_window_size(1400, 1000)


def test_an_agent_programs_episode_shows_each_row_and_marks_its_mismatch(browser, tmp_path):
    run = write_synthetic_run(tmp_path / "agents", episodes=8, per_step=8, agent_programs=True)
    source = RunDir(run).sources()["."]
    number = next(n for n in range(len(source.episodes)) if "rows" in source.episode(n)["tokens"])
    rows = source.episode(number)["tokens"]["rows"]
    with serve_in_thread(create_app([RunDir(run)])) as url:
        browser.get(f"{url}/#/episode?run=0&source=.&index={number}")
        shown = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#tokens .token-row"))
        assert len(shown) == 2
        heads, marks, masks = zip(
            *browser.execute_script(
                "return [...document.querySelectorAll('#tokens .token-row')].map(row => [row.querySelector('h4')"
                ".firstChild.textContent, row.querySelector('.mismatch-mark')?.textContent ?? null,"
                " [...row.querySelectorAll('.tok')].map(t => Number(t.dataset.mask))])"
            ),
            strict=True,
        )
        assert heads == ("row 1 of 2", "row 2 of 2")
        assert marks == (None, "prefix mismatch: the conversation did not continue as the model wrote it")
        assert list(masks) == [row["mask"] for row in rows]
        assert browser.find_element(By.ID, "episode-rows").text == "rows 2 1 prefix mismatch"


def test_curves_overlay_two_runs_and_the_page_counts_damaged_lines(browser, trained_run, synthetic_run):
    out, _ = trained_run
    with open(synthetic_run / "trajectories.jsonl", "ab") as handle:
        handle.write(b'{"env_id": "AgentFly/Math-v0", "observation": "cut he\n')
    runs = [RunDir(out, name="shout"), RunDir(synthetic_run, name="synthetic")]
    with serve_in_thread(create_app(runs)) as url:
        browser.get(f"{url}/#/curves")
        wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".chart canvas")) >= 4)
        legend = browser.find_element(By.CSS_SELECTOR, "[data-chart='Reward'] .u-legend").text
        assert "shout reward_mean" in legend and "synthetic reward_mean" in legend
        assert "synthetic AgentFly/Search-v0" in legend  # a mixed run: one curve per env
        notices = browser.find_element(By.ID, "notices").text
        assert "synthetic: 1 corrupt line skipped in trajectories.jsonl" in notices


def test_the_episode_list_shows_each_tools_calls_failures_and_latency(browser, synthetic_run, tmp_path):
    """The per-tool panel over a run's file, some calculator calls made to time out or fail; its screenshot is
    copied to runs/view-tools-screenshot.png."""
    path = synthetic_run / TRAJECTORIES_FILE
    written = list(read_trajectories(path))
    for number, trajectory in enumerate(written):
        for result in (r for step in trajectory.steps for r in step.tool_results):
            if number % 5 == 0:
                result.error, result.duration_s = "timeout", 0.05
            elif number % 7 == 0:
                result.error = "tool_error"
    path.write_bytes(b"".join(msgspec.json.encode(trajectory) + b"\n" for trajectory in written))
    expected = tool_stats(t.steps for t in written)["calculator"]
    assert 0 < expected.timeout_rate < expected.error_rate < 1
    with serve_in_thread(create_app([RunDir(synthetic_run)])) as url:
        browser.get(f"{url}/#/episodes")
        row = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#tool-table tbody tr[data-tool='calculator']"))
        cells = [cell.text for cell in row[0].find_elements(By.TAG_NAME, "td")]
        assert cells == [
            "calculator",
            str(expected.calls),
            f"{expected.calls_per_episode:.2f}",
            f"{100 * expected.error_rate:.1f}%",
            f"{100 * expected.timeout_rate:.1f}%",
            f"{expected.latency_ms_p50:.2f} ms",
            f"{expected.latency_ms_p95:.2f} ms",
        ]
        assert browser.find_element(By.CSS_SELECTOR, "#tool-panel h3").text == "Tools (64 episodes)"
        screenshot = tmp_path / "view-tools.png"
        assert browser.save_screenshot(str(screenshot)) and screenshot.stat().st_size > 10_000
        TOOLS_SCREENSHOT_COPY.parent.mkdir(exist_ok=True)
        shutil.copyfile(screenshot, TOOLS_SCREENSHOT_COPY)


def test_a_growing_run_refreshes_live(browser, synthetic_run):
    path = synthetic_run / "trajectories.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:40]))
    with serve_in_thread(create_app([RunDir(synthetic_run)])) as url:
        browser.get(f"{url}/#/episodes")
        wait(browser, lambda d: d.find_element(By.ID, "list-info").text.startswith("40 of 40"))
        with open(path, "ab") as handle:
            handle.write(b"".join(lines[40:]))
        wait(browser, lambda d: d.find_element(By.ID, "list-info").text.startswith("64 of 64"))
        assert browser.find_element(By.ID, "page-info").text == "1-50 of 64"


def test_step_axes_tick_whole_steps_and_a_zero_kl_gets_a_small_range(browser, tmp_path):
    run = write_synthetic_run(tmp_path / "run", episodes=24, per_step=8)  # 3 steps: uPlot's own ticks are 0.5 apart
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    (run / "metrics.jsonl").write_text("".join(json.dumps({**m, "kl": 0.0}) + "\n" for m in metrics))
    with serve_in_thread(create_app([RunDir(run)])) as url:
        browser.get(f"{url}/#/curves")
        wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".chart canvas")) >= 6)
        charts = browser.execute_script(
            "return state.plots.map(u => [u.root.parentElement.dataset.chart, u.axes[0]._splits, u.scales.y.min, u.scales.y.max])"
        )
    ticks = {title: splits for title, splits, *_ in charts}
    assert set(ticks) >= {"Reward", "KL", "Losses"}
    assert all(len(splits) >= 2 and all(float(x).is_integer() for x in splits) for splits in ticks.values()), ticks
    kl_min, kl_max = next((low, high) for title, _, low, high in charts if title == "KL")
    assert -1 <= kl_min < 0 < kl_max <= 1  # around the flat 0, not uPlot's 0 to 100
