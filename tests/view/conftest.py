"""Fixtures of the viewer's tests (agentfly_view; the `view` extra, and the `train` extra for a real run).

The real training run reuses the trainer tests' tiny model and ShoutEnv (tests/train), so the viewer is
tested on exactly what the trainer writes. The browser is Debian's chromium driven by selenium through
Debian's chromium-driver (``make system-deps`` and ``.ci/run`` install both).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "train"))  # the trainer tests' helpers, as they import them

from test_train_learning import ShoutEnv, shout_config  # noqa: E402
from test_train_rollout import tiny_model  # noqa: E402
from train.conftest import tokenizer  # noqa: E402, F401 - the trainer tests' fixture (smollm2_dir is shared from tests/)

from agentfly_view.synthetic import write_synthetic_run  # noqa: E402


@pytest.fixture
def synthetic_run(tmp_path) -> Path:
    """A small synthetic run (two envs, 8 steps of 8 episodes) in the trainer's formats."""
    return write_synthetic_run(tmp_path / "run", episodes=64, per_step=8)


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, tokenizer) -> tuple[Path, dict]:  # noqa: F811 - the fixture imported above
    """A short real training run (GRPO, the tiny model on ShoutEnv, 2 steps: a few seconds) and the episodes
    it trained on, by episode id, as the rollout returned them (the truth the viewer must show)."""
    import torch

    from agentfly_train.backends.local import LocalTrainer

    out = tmp_path_factory.mktemp("shout-run")
    trainer = LocalTrainer(
        shout_config("grpo", out, steps=2),
        model=tiny_model(tokenizer),
        tokenizer=tokenizer,
        env_fn=lambda: ShoutEnv(max_turns=3),
    )
    played = {}
    play = trainer.rollout.run

    def recording(*args, **kwargs):
        result = play(*args, **kwargs)
        played.update({episode.trajectory.episode_id: episode for episode in result.episodes})
        return result

    trainer.rollout.run = recording
    threads = torch.get_num_threads()
    try:
        trainer.fit()
    finally:
        torch.set_num_threads(threads)  # the config asks for one thread; other tests keep theirs
    return out, played


@pytest.fixture(scope="session")
def browser() -> Iterator:
    """Headless chromium (Debian's) through chromedriver, shared by the browser tests."""
    from selenium import webdriver

    driver_path = shutil.which("chromedriver")
    if driver_path is None:
        raise RuntimeError("chromedriver not found: `make system-deps` installs chromium and chromium-driver")
    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver_path))
    try:
        yield driver
    finally:
        driver.quit()
