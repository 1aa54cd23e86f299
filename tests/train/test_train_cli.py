"""``agentfly-train``: config handling, early errors, end to end on the bundled model, evaluation against
a local OpenAI-compatible server, task export, the model cache, the vLLM mapping and the docstrings.
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from docstring_examples import module_names, run_docstring_examples

import agentfly_train
from agentfly_envs.math.calculator import evaluate as calculate
from agentfly_train import models
from agentfly_train.cli import main
from agentfly_train.config import Config, ConfigError, apply_overrides
from agentfly_train.evaluate import evaluate
from agentfly_train.generation.openai import OpenAIChatClient, ServerError

# ----------------------------------------------------------------------------- config


def test_toml_then_flags_then_set(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(
        'algo = "rloo"\n[env]\nid = "AgentFly/Math-v0"\noptions = { difficulty = 2 }\n'
        "[train]\nlr = 1e-6\nsteps = 5\n[rollout]\nstop = ['</answer>']\n"
    )
    config = Config.load(path)
    assert (config.algo, config.train.lr, config.env.options, config.rollout.stop) == (
        "rloo",
        1e-6,
        {"difficulty": 2},
        ["</answer>"],
    )
    apply_overrides(
        config, ["train.lr=3e-5", "env.options.difficulty=0", "env.options.tools=[]", "log.wandb=true", "out_dir=x y"]
    )
    assert (config.train.lr, config.env.options, config.log.wandb, config.out_dir) == (
        3e-5,
        {"difficulty": 0, "tools": []},
        True,
        "x y",
    )
    assert Config.load("quickstart").algo == "grpo"


@pytest.mark.parametrize(
    ("data", "overrides", "message"),
    [
        ({"algo": "dpo"}, [], "unknown algo 'dpo'"),
        ({"backend": "ray"}, [], "unknown backend"),
        ({"env": {"id": "AgentFly/Nope-v0"}}, [], "unknown env id 'AgentFly/Nope-v0'; registered: .*AgentFly/Math-v0"),
        ({"model": {"path": "/no/such/model"}}, [], "model path '/no/such/model' does not exist"),
        ({"model": {"path": "./weights.gguf"}}, [], "does not exist"),
        ({"rollout": {"samples_per_prompt": 1}}, [], "samples_per_prompt must be at least 2"),
        ({"rollout": {"max_episode_tokens": 64, "max_new_tokens": 64}}, [], "must exceed"),
        ({"train": {"mini_batch_size": 5}}, [], "must divide"),
        ({"rollout": {"observation_role": "system"}}, [], "observation_role must be one of"),
        (
            {"algorithm": {"is_correction_level": "seq", "is_correction_mode": "clip"}},
            [],
            "is_correction_mode = 'clip' needs is_correction_level = 'token'",
        ),
        (
            {"algorithm": {"is_correction_level": "token", "is_correction_gating": "tv"}},
            [],
            "bounded from above only",
        ),
        ({"algorithm": {"is_correction_level": "token", "is_correction_threshold": [5, 1]}}, [], "low <= high"),
        ({"env": {"pool": "cluster"}}, [], "env.pool must be one of local, ray"),
        (
            {"env": {"pool": "ray", "backend_pools": {"jvm": {"size": 8}}}},
            [],
            "backend_pools .* needs env.pool = 'local'",
        ),
        ({"train": {"stpes": 3}}, [], "unknown config key 'train.stpes'"),
        ({"train": {"steps": "many"}}, [], "train.steps must be a int"),
        ({}, ["nosection.x=1"], "unknown config key"),
        ({}, ["train.lr"], "must look like section.field=value"),
    ],
)
def test_bad_configs_are_clear(data, overrides, message):
    with pytest.raises(ConfigError, match=message):
        apply_overrides(Config.from_dict(data), overrides).validate()


def test_a_missing_hub_model_is_reported_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ConfigError, match="not in the local Hugging Face cache"):
        Config.from_dict({"model": {"path": "someone/some-model"}}).validate()


EARLY = """
import sys, time
from agentfly_train.cli import main
for argv in {cases!r}:
    started = time.perf_counter()
    try:
        main(argv)
    except SystemExit as exit:
        print("exit", exit.code, round(time.perf_counter() - started, 3))
print("heavy", sorted(m for m in ("torch", "transformers") if m in sys.modules))
"""


def test_the_config_reads_the_backend_registry_without_importing_any_backend():
    """No import circle: the config imports the registry, which imports nothing of the trainer; the backends
    package (which builds a backend from a config) is not imported by reading one."""
    code = (
        "import sys; from agentfly_train.config import Config; Config.load('quickstart').validate(check_model=False)\n"
        "print(sorted(m for m in sys.modules if m.startswith('agentfly_train.backends')))"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # The openrlhf section is read to decode [openrlhf]: its light config module (and its packages), no backend.
    loaded = (
        "['agentfly_train.backends', 'agentfly_train.backends.openrlhf', 'agentfly_train.backends.openrlhf.config']"
    )
    assert ran.stdout.split("\n")[-2] == loaded
    config_source = Path(sys.modules["agentfly_train.config"].__file__).read_text()
    assert (
        "from agentfly_train.backends import" not in config_source
        and "import agentfly_train.backends" not in config_source
    )


def test_help_and_bad_configs_fail_before_anything_heavy_loads():
    cases = [
        ["--help"],
        ["--algo", "dpo"],
        ["--env", "AgentFly/Nope-v0"],
        ["--model", "/no/such/dir"],
        ["eval", "--model", "/no/x"],
        ["--set", "rollout.samples_per_prompt=1"],
        ["--config", "/no/such.toml"],
    ]
    run = subprocess.run(
        [sys.executable, "-c", EARLY.format(cases=cases)], capture_output=True, text=True, timeout=120, check=False
    )
    exits = re.findall(r"exit (\d+) ([\d.]+)", run.stdout)
    assert [code for code, _ in exits] == ["0", "2", "2", "2", "2", "2", "2"], run.stdout + run.stderr
    assert "heavy []" in run.stdout  # neither torch nor transformers was imported
    assert max(float(seconds) for _, seconds in exits) < 20  # generous: the machine is shared
    for expected in [
        "invalid choice: 'dpo'",
        "unknown env id 'AgentFly/Nope-v0'",
        "model path '/no/such/dir' does not exist",
        "model path '/no/x' does not exist",
        "samples_per_prompt must be at least 2",
        "config file '/no/such.toml' not found",
    ]:
        assert expected in run.stderr


# ----------------------------------------------------------------------------- end to end on the bundled model


def test_train_then_eval_on_the_bundled_model(smollm2_dir, tmp_path, capsys):
    cache = str(Path(smollm2_dir).parent)
    out = tmp_path / "run"
    code = main(
        [
            # no tools: a short prompt keeps this fast; the rollout tests cover tool calls
            "--algo",
            "grpo",
            "--env",
            "AgentFly/Math-v0",
            "--env-option",
            "difficulty=0",
            "--env-option",
            "tools=[]",
            "--model",
            "smollm2-135m",
            "--model-cache",
            cache,
            "--steps",
            "2",
            "--prompts-per-step",
            "2",
            "--samples-per-prompt",
            "2",
            "--max-new-tokens",
            "8",
            "--max-turns",
            "2",
            "--out",
            str(out),
            "--no-progress",
            "--lr",
            "1e-5",
            "--set",
            "train.save_every=1",
            "--set",
            "algorithm.kl_coef=0.01",
            "--set",
            "rollout.stop=['</answer>']",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "step 2/2: reward" in printed and "reward curve" in printed
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]
    for key in (
        "reward_mean",
        "success_rate",
        "turns_per_episode",
        "tool_calls_per_episode",
        "parse_errors_per_episode",
        "truncated_rate",
        "env_latency_ms",
        "rollout_pool_leases_peak",
        "rollout_tokens_per_s",
        "kl",
        "kl_loss",
        "policy_loss",
    ):
        assert key in records[-1], key
    assert 1 <= records[0]["turns_per_episode"] <= 2 and records[0]["rollout_generated_tokens"] > 0
    assert len((out / "trajectories.jsonl").read_text().splitlines()) == 8
    assert (out / "reward_curve.png").read_bytes()[:4] == b"\x89PNG"
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-000001", "step-000002"]
    assert json.loads((out / "config.json").read_text())["rollout"]["prompts_per_step"] == 2

    code = main(
        [
            "eval",
            "--model",
            str(out / "final"),
            "--env",
            "AgentFly/Math-v0",
            "--env-option",
            "difficulty=0",
            "--env-option",
            "tools=[]",
            "--episodes",
            "3",
            "--max-new-tokens",
            "8",
            "--max-turns",
            "1",
            "--out",
            str(out),
            # The trained model samples itself: a second vLLM boot would double the test's time, and an engine
            # started from a loaded policy (as eval's would be) is test_vllm.py's.
            "--set",
            "rollout.generator='transformers'",
        ]
    )
    assert code == 0
    summary = json.loads((out / "eval" / "summary.json").read_text())
    assert summary["episodes"] == 3 and summary["env_options"]["split"] == "eval" and 0 <= summary["success_rate"] <= 1
    assert len((out / "eval" / "trajectories.jsonl").read_text().splitlines()) == 3


# ----------------------------------------------------------------------------- evaluation against a server


class ChatServer(ThreadingHTTPServer):
    """A tiny OpenAI-compatible chat server: it solves Math-v0 arithmetic with the calculator tool."""

    def __init__(self, failures: int = 0) -> None:
        super().__init__(("127.0.0.1", 0), ChatHandler)
        self.requests: list[dict] = []
        self.failures = failures
        self.lock = threading.Lock()

    def __enter__(self) -> ChatServer:  # noqa: PYI034
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class ChatHandler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        server: ChatServer = self.server  # type: ignore[assignment]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with server.lock:
            server.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
            fail = server.failures > 0
            server.failures -= fail
        if fail:
            self._send(503, {"error": "warming up"})
            return
        last = body["messages"][-1]
        if last["role"] == "user":  # the task: ask the calculator
            expression = last["content"].removeprefix("Calculate ").rstrip(".")
            text = f'<tool_call>{{"name": "calculator", "arguments": {{"expression": "{expression}"}}}}'
            stop_reason = "</tool_call>"  # a vLLM server cuts the stop string and says which it was
        else:  # the calculator answered
            text, stop_reason = f"<answer>{last['content']}", "</answer>"
        self._send(
            200,
            {
                "choices": [
                    {
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                        "stop_reason": stop_reason,
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5},
            },
        )

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_eval_against_an_openai_compatible_server(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-test")
    with ChatServer(failures=2) as server:
        config = Config.from_dict(
            {
                "out_dir": str(tmp_path),
                "env": {"id": "AgentFly/Math-v0", "options": {"difficulty": 0}},
                "rollout": {"stop": ["</tool_call>", "</answer>"], "max_new_tokens": 64},
                "eval": {
                    "base_url": server.url,
                    "server_model": "served",
                    "episodes": 6,
                    "concurrency": 3,
                    "api_key_env": "MY_KEY",
                },
            }
        )
        summary = evaluate(config)
    assert (summary["episodes"], summary["success_rate"], summary["reward_mean"]) == (6, 1.0, 1.0)
    assert (summary["turns_per_episode"], summary["tool_calls_per_episode"], summary["errors_per_episode"]) == (
        2.0,
        1.0,
        0.0,
    )
    requests = server.requests
    assert len(requests) == 12 + 2  # two turns per episode, and two refused while "warming up" (retried)
    first = requests[-1]
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer sk-test"
    assert (first["model"], first["temperature"], first["max_tokens"], first["stop"]) == (
        "served",
        0.0,
        64,
        ["</tool_call>", "</answer>"],
    )
    roles = max((r["messages"] for r in requests), key=len)
    assert [m["role"] for m in roles] == ["system", "user", "assistant", "tool"]
    assert roles[2]["content"].endswith("</tool_call>")  # the cut stop string was put back before the env saw it
    expected = calculate(roles[1]["content"].removeprefix("Calculate ").rstrip("."))
    assert roles[3]["content"] == expected
    saved = (tmp_path / "eval" / "trajectories.jsonl").read_text().splitlines()
    assert len(saved) == 6 and json.loads((tmp_path / "eval" / "summary.json").read_text())["success_rate"] == 1.0


def test_server_errors_are_clear():
    with ChatServer(failures=10) as server:
        client = OpenAIChatClient(server.url, "m", retries=1)
        with pytest.raises(ServerError, match="HTTP 503"):
            client.complete([{"role": "user", "content": "hi"}])
        assert len(server.requests) == 2
    with pytest.raises(ServerError, match="cannot reach"):
        OpenAIChatClient("http://127.0.0.1:9/v1", "m", retries=0, timeout_s=2).complete(
            [{"role": "user", "content": "x"}]
        )


# ----------------------------------------------------------------------------- export, model cache, vLLM mapping


def test_export_tasks_for_openrlhf(tmp_path):
    out = tmp_path / "prompts.jsonl"
    assert (
        main(
            [
                "export",
                "--env",
                "AgentFly/Math-v0",
                "--env-option",
                "difficulty=0",
                "--count",
                "4",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 4
    label = json.loads(rows[3]["label"])
    assert label == {"env_id": "AgentFly/Math-v0", "options": {"difficulty": 0}, "seed": 3}
    import gymnasium as gym

    env = gym.make(label["env_id"], **label["options"])
    assert env.reset(seed=label["seed"])[0] == rows[3]["prompt"][-1]["content"]  # the label rebuilds the episode


def test_model_cache_converts_once_atomically_and_cleans_up(tmp_path, monkeypatch):
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF" + bytes(range(256)) * 10)
    calls = []

    def fake_convert(source, out):
        calls.append(out)
        out.mkdir()
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(models, "_convert", fake_convert)
    first = models.convert_gguf(gguf, tmp_path / "cache")
    assert models.convert_gguf(gguf, tmp_path / "cache") == first and len(calls) == 1
    assert first.name.startswith("tiny-") and (first / "config.json").exists()
    assert calls[0].name.startswith(".") and not calls[0].exists()  # built aside, renamed into place

    def crash(source, out):
        out.mkdir()
        (out / "half").write_text("x")
        raise RuntimeError("killed mid-way")

    monkeypatch.setattr(models, "_convert", crash)
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF" + b"x" * 100)
    with pytest.raises(RuntimeError, match="mid-way"):
        models.convert_gguf(other, tmp_path / "cache")
    assert sorted(p.name for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".lock")) == [first.name]
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path / "env-cache"))
    assert models.model_cache_dir() == tmp_path / "env-cache"


def test_bundled_model_conversion(smollm2_dir):
    folder = Path(smollm2_dir)
    assert (folder / "model.safetensors").stat().st_size > 100_000_000
    config = json.loads((folder / "tokenizer_config.json").read_text())
    assert (config["eos_token"], config["pad_token"]) == ("<|im_end|>", "<|im_end|>")
    started = time.perf_counter()
    assert models.resolve_model_path("SmolLM2-135M", cache_dir=folder.parent) == str(folder)
    assert time.perf_counter() - started < 5  # cached: no second conversion


# ----------------------------------------------------------------------------- docstrings


@pytest.mark.parametrize("name", module_names(agentfly_train))
def test_docstring_examples(name):
    module = importlib.import_module(name)
    assert module.__doc__ and "Example" in module.__doc__
    run_docstring_examples(name)
