"""scripts/gpu_check.py, the prepared GPU check, end to end on the CPU: a tiny model, one GRPO step."""

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check.py"
TINY = ["--layers", "1", "--hidden", "32"]
#: 4 episodes of at most 2 turns of 8 tokens
SMALL_ROLLOUT = [
    "--set",
    "rollout.prompts_per_step=2",
    "rollout.samples_per_prompt=2",
    "rollout.max_turns=2",
    "rollout.max_new_tokens=8",
]


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def unchanged_sys_path(monkeypatch):
    """The script puts the repo (and the wheels it installs) on ``sys.path``: not for the tests after these."""
    monkeypatch.setattr(sys, "path", list(sys.path))


@pytest.fixture
def assets(tmp_path, tokenizer):
    """What ``--prepare`` writes, less the wheels (everything is installed here)."""
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    return tmp_path


def test_one_step_on_the_cpu_reports_what_it_measured(gpu_check, assets, capsys):
    out = assets / "result.json"
    result = gpu_check.main(
        ["--device", "cpu", "--assets", str(assets), "--steps", "1", "--out", str(out), *TINY, *SMALL_ROLLOUT]
    )

    assert (result["device"], result["weights_device"], result["dtype"]) == ("cpu", "cpu", "float32")
    assert result["torch"] == torch.__version__ and result["episodes_per_step"] == 4
    [step] = result["steps"]
    assert math.isfinite(step["step_s"]) and 0 < step["rollout_s"] + step["update_s"] <= step["step_s"]
    assert 0 < step["generated_tokens"] <= 4 * 2 * 8  # episodes x turns x tokens a turn
    assert step["sequence_tokens"] > step["generated_tokens"]  # the prompts and observations as well
    assert step["peak_memory_gib"] is None  # CUDA's counter only
    assert len(result["rewards"]) == 1 and 0.0 <= result["rewards"][0] <= 1.0
    assert result["ok"]
    printed = capsys.readouterr().out
    assert "device cpu" in printed
    last = printed.strip().splitlines()[-1]
    assert last.startswith("GPU_CHECK ") and json.loads(last.removeprefix("GPU_CHECK ")) == result
    assert json.loads(out.read_text()) == result


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_cuda_without_a_gpu_fails_instead_of_running_on_the_cpu(gpu_check, assets):
    with pytest.raises(SystemExit, match="no CUDA device"):
        gpu_check.main(["--assets", str(assets), *TINY])


def test_a_missing_dependency_without_its_wheel_says_to_prepare(gpu_check, tmp_path, monkeypatch):
    monkeypatch.setitem(gpu_check.CARRIED, "no-such-distribution", "no_such_module")
    (tmp_path / "tokenizer").mkdir()
    with pytest.raises(SystemExit, match="missing no-such-distribution .*--prepare"):
        gpu_check.main(["--device", "cpu", "--assets", str(tmp_path)])


def test_a_run_without_prepared_assets_says_to_prepare(gpu_check, tmp_path):
    with pytest.raises(SystemExit, match="no tokenizer in .*--prepare"):
        gpu_check.main(["--device", "cpu", "--assets", str(tmp_path)])
