"""Every bundled preset (``agentfly_train/data``) loads, validates and does what it says; a broken one fails here.

* every preset: :meth:`Config.load` and :meth:`Config.validate` (the env id registered; the model is not looked
  up: the paper-scale presets name hub models this machine need not have);
* a local-backend preset: its env made with its train and its eval options, and reset;
* an openrlhf-backend preset: ``agentfly-train --config NAME --dry-run`` builds the command, and OpenRLHF's own
  parser and checks accept it (the helpers of ``test_openrlhf_launcher.py``);
* the paper-scale presets keep the AgentFly paper's setting, and ``extends`` (how they share it) merges as
  documented.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import gymnasium as gym
import pytest
from test_openrlhf_launcher import entry_args, lines, openrlhf_parse

from agentfly_train.backends.openrlhf import launcher
from agentfly_train.backends.openrlhf.settings import SETTINGS_FILE, Settings
from agentfly_train.cli import main
from agentfly_train.config import PRESET_DIR, Config, ConfigError, preset_names

PRESETS = preset_names()
OPENRLHF_PRESETS = [name for name in PRESETS if Config.load(name).backend == "openrlhf"]
LOCAL_PRESETS = [name for name in PRESETS if name not in OPENRLHF_PRESETS]
PAPER_PRESETS = [name for name in PRESETS if name.startswith("paper-")]
#: Tasks exported per prompt file in a test's dry run. A paper-scale run exports train.steps x prompts_per_step
#: tasks (12,800 for paper-scienceworld, a reset each, a JVM behind); two show that the env is made and its
#: prompts export.
EXPORTED = 2
#: What a test's dry run changes in a preset, and why: dense retrieval encodes the whole corpus with a
#: sentence-transformers model the first time (minutes on a CPU; the dense retriever has its own tests in
#: tests/envs); BM25 builds in a second, and the prompts are the same.
CHEAPER = {"paper-retrieval": ["--set", 'env.options.retrieval="bm25"']}


def test_the_presets_are_found():
    assert {"openrlhf", "paper-code", "paper-webshop-local"} <= set(PRESETS) and "_paper" not in PRESETS
    assert (
        set(OPENRLHF_PRESETS) >= {f"paper-{family}" for family in FAMILIES} and "paper-webshop-local" in LOCAL_PRESETS
    )


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_validates(name):
    config = Config.load(name).validate(check_model=False)
    assert config.to_dict() == Config.from_dict(config.to_dict()).to_dict()  # what a run saves reads back the same


@pytest.mark.parametrize("name", LOCAL_PRESETS)
def test_local_presets_make_their_env(name):
    config = Config.load(name)
    for options in (config.env.options, {**config.env.options, **config.env.eval_options}):
        env = gym.make(config.env.id, **options)
        try:
            _, info = env.reset(seed=0)
            assert info["start"].observation
        finally:
            env.close()


@pytest.mark.parametrize("name", OPENRLHF_PRESETS)
def test_openrlhf_presets_dry_run_to_a_command_openrlhf_accepts(name, tmp_path, capsys, monkeypatch):
    def export_few(config, path, *, count, **kwargs):
        return launcher_export(config, path, count=min(count, EXPORTED), **kwargs)

    launcher_export = launcher.export_tasks
    monkeypatch.setattr(launcher, "export_tasks", export_few)
    out = tmp_path / "run"
    assert main(["--config", name, "--dry-run", "--out", str(out), *CHEAPER.get(name, [])]) == 0
    args = openrlhf_parse(entry_args(shlex.split(capsys.readouterr().out.strip().splitlines()[-1])))
    config = Config.load(name)
    rollout, train = config.rollout, config.train
    assert args.actor.model_name_or_path == config.model.path
    assert (args.algo.advantage.estimator, args.actor.adam.lr) == (config.estimator, train.lr)
    assert (args.rollout.batch_size, args.rollout.n_samples_per_prompt) == (
        rollout.prompts_per_step,
        rollout.samples_per_prompt,
    )
    assert (args.data.max_len, args.rollout.max_new_tokens) == (rollout.max_episode_tokens, rollout.max_new_tokens)
    assert (args.algo.kl.init_coef, args.algo.kl.use_loss) == (config.algorithm.kl_coef, config.kl_mode == "loss")
    assert args.train.batch_size == (train.mini_batch_size or config.episodes_per_step)
    assert args.actor.num_nodes * args.actor.num_gpus_per_node == config.openrlhf.actor_gpus
    labels = [json.loads(row["label"]) for row in lines(args.data.prompt_dataset)]
    assert len(labels) == EXPORTED and all(label["env_id"] == config.env.id for label in labels)
    # The env enforces the turn budget: the plug-in's settings carry it, the labels do not.
    assert Settings.read(Path(args.train.agent_func_path).with_name(SETTINGS_FILE)).max_turns == rollout.max_turns
    assert all(label["options"].get("max_turns") == config.env.options.get("max_turns") for label in labels)
    if config.openrlhf.eval_every:
        assert args.eval.steps == config.openrlhf.eval_every and len(lines(args.eval.dataset)) == EXPORTED


# ----------------------------------------------------------------------------- the paper's setting

#: The families of the AgentFly paper (arXiv 2507.14897) and the env each trains on.
FAMILIES = {
    "code": "AgentFly/Code-v0",
    "math": "AgentFly/Math-v0",
    "retrieval": "AgentFly/Search-v0",
    "webshop": "AgentFly/WebShop-v0",
    "alfworld": "AgentFly/ALFWorld-v0",
    "scienceworld": "AgentFly/ScienceWorld-v0",
}


@pytest.mark.parametrize("name", PAPER_PRESETS)
def test_paper_presets_keep_the_papers_setting(name):
    config = Config.load(name)
    family = name.removeprefix("paper-").removesuffix("-local")
    assert config.env.id == FAMILIES[family]
    assert config.rollout.max_turns == 4  # the paper's main setting
    assert config.model.path == (
        "Qwen/Qwen2.5-3B-Instruct" if config.backend == "local" else "Qwen/Qwen2.5-7B-Instruct"
    )
    assert (config.kl_mode, config.kl_estimator) == ("loss", "k2")  # verl's KL loss of type mse
    assert config.out_dir == f"runs/{name}"  # two presets never write into one run dir


def test_the_3b_switch_reaches_openrlhf(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(launcher, "export_tasks", lambda config, path, *, count, **kwargs: count)
    code = main(
        ["--config", "paper-webshop", "--model", "Qwen/Qwen2.5-3B-Instruct", "--dry-run", "--out", str(tmp_path)]
    )
    args = openrlhf_parse(entry_args(shlex.split(capsys.readouterr().out.strip().splitlines()[-1])))
    assert code == 0 and args.actor.model_name_or_path == "Qwen/Qwen2.5-3B-Instruct"


# ----------------------------------------------------------------------------- extends


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_extends_merges_tables_key_by_key_and_replaces_other_values(tmp_path):
    write(
        tmp_path,
        "base.toml",
        'algo = "rloo"\n[rollout]\nmax_turns = 4\nstop = ["a", "b"]\n[train]\nlr = 1e-6\nsteps = 5\n',
    )
    path = write(tmp_path, "child.toml", 'extends = "base.toml"\n[rollout]\nstop = ["c"]\n[train]\nlr = 2e-6\n')
    config = Config.load(path)
    assert (config.algo, config.rollout.max_turns, config.rollout.stop) == ("rloo", 4, ["c"])
    assert (config.train.lr, config.train.steps) == (2e-6, 5)
    assert "extends" not in config.to_dict()


def test_extends_reaches_a_preset_and_chains(tmp_path):
    middle = write(tmp_path, "middle.toml", 'extends = "paper-webshop"\nseed = 3\n')
    config = Config.load(write(tmp_path, "top.toml", f'extends = "{middle.name}"\n[train]\nsteps = 7\n'))
    assert (config.env.id, config.seed, config.train.steps, config.train.lr) == ("AgentFly/WebShop-v0", 3, 7, 4e-7)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"a.toml": 'extends = "b.toml"', "b.toml": 'extends = "a.toml"'}, r"in a loop: a.toml -> b.toml -> a.toml"),
        ({"a.toml": 'extends = "a.toml"'}, r"in a loop: a.toml -> a.toml"),
        ({"a.toml": 'extends = "nowhere"'}, r"config file 'nowhere' not found \(presets: .*paper-code"),
        ({"a.toml": "extends = 3"}, r"extends must name a config file or a preset, got 3"),
        ({"a.toml": 'extends = "b.toml"', "b.toml": "[train\n"}, r"b.toml: not valid TOML"),
        ({"a.toml": 'extends = "b.toml"', "b.toml": "[train]\nsteps = 0\n"}, r"train.steps must be at least 1"),
    ],
)
def test_bad_extends_is_clear(tmp_path, files, message):
    for name, text in files.items():
        write(tmp_path, name, text)
    with pytest.raises(ConfigError, match=message):
        Config.load(tmp_path / "a.toml")


def test_the_shared_base_is_not_offered_as_a_preset():
    assert (PRESET_DIR / "_paper.toml").is_file() and "_paper" not in preset_names()
    assert Config.load("_paper").backend == "openrlhf"  # still loadable by name, for extends
