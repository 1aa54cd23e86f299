"""The OpenRLHF plug-in's settings: one JSON file the launcher writes and the executors read.

OpenRLHF builds the plug-in's ``AgentExecutor()`` without arguments, in every vLLM engine actor, from the file
``--train.agent_func_path`` names. ``agentfly-train --backend openrlhf`` writes two files into its job dir
(``<out_dir>/openrlhf``, also the working dir of a job submitted to a cluster) with :func:`write_plugin`:

* ``agentfly-settings.json`` (:data:`SETTINGS_FILE`): a :class:`Settings` record;
* ``agentfly_agent.py`` (:data:`AGENT_FILE_NAME`), the file ``--train.agent_func_path`` names: it imports the
  env loop's executor (:mod:`~agentfly_train.backends.openrlhf.executor`), or the program executor
  (:mod:`~agentfly_train.backends.openrlhf.program_executor`) when the settings name an agent program, bound to the
  settings file beside it (``Path(__file__)``: OpenRLHF's loader sets it), and exposes it as ``AgentExecutor``.

This module imports neither torch nor OpenRLHF: the launcher writes the files on any machine (``--dry-run``).

Example:
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     agent_file = write_plugin(folder, Settings(pool="local", max_turns=4, tools=("calculator",)))
    ...     settings, text = Settings.read(Path(folder) / SETTINGS_FILE), agent_file.read_text()
    >>> agent_file.name, settings.max_turns, settings.tools
    ('agentfly_agent.py', 4, ('calculator',))
    >>> "from agentfly_train.backends.openrlhf.executor import AgentExecutor" in text
    True
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import msgspec

from agentfly_train.backends.openrlhf.config import EnvPool
from agentfly_train.config import AgentConfig, AtLeastOne, Positive, ZeroOrMore

#: The settings file's name, beside the generated agent file.
SETTINGS_FILE = "agentfly-settings.json"
#: The generated agent file's name (``--train.agent_func_path``).
AGENT_FILE_NAME = "agentfly_agent.py"

_AGENT_FILE = '''\
"""The AgentFly plug-in for OpenRLHF's --train.agent_func_path, written by agentfly-train: {what}, with the
settings in {settings} beside this file (agentfly_train.backends.openrlhf.settings)."""

from pathlib import Path

from {module} import {name} as _Executor

AgentExecutor = _Executor.bound(Path(__file__).absolute().with_name("{settings}"))
'''


class Settings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The plug-in's settings (``agentfly-settings.json``); the defaults are what a plug-in without a settings file
    plays with (``agent.py`` and ``program_agent.py`` loaded by hand).

    Attributes:
        pool: Where the envs run: ``ray`` (actors across the cluster), ``local`` (in the engine's process) or
            ``auto`` (Ray when it is initialised); ``openrlhf.env_pool``.
        pool_size: Env instances per (env, options) in each engine process; ``openrlhf.env_pool_size``.
        actor_options: :class:`~agentfly_env.resources.distributed.RayEnvOptions` fields for the env actors, e.g.
            ``{"num_cpus": 1, "resources": {"env_node": 1}}`` to place them on CPU nodes;
            ``openrlhf.env_actor_options``.
        observation_role: ``tool`` or ``user``: the chat role of an observation turn; ``rollout.observation_role``.
        lease_timeout_s: How long an episode waits for a free env; ``openrlhf.lease_timeout_s``.
        min_turn_tokens: Room a turn needs to be worth generating; ``openrlhf.min_turn_tokens``.
        max_turn_tokens: A turn's token budget (0: none of its own); ``rollout.max_new_tokens``.
        stop: Stop strings, kept in the output; ``rollout.stop``.
        top_k: Top-k sampling (0: off); ``rollout.top_k``.
        max_turns: The episode's turn limit, given to each env as its ``max_turns`` option unless the label's
            options set one (None: the env's own); ``rollout.max_turns``.
        tools: The tools whose calls every episode logs (``tool/<name>/calls``, ...): the tool names of the run's
            envs' manifests.
        agent: The run's ``[agent]`` section when an agent program plays the episodes (a program's file as an
            absolute path); read by the program executor.
    """

    pool: EnvPool = "auto"
    pool_size: AtLeastOne = 16
    actor_options: dict[str, Any] = {}
    observation_role: Literal["tool", "user"] = "tool"
    lease_timeout_s: Positive = 600.0
    min_turn_tokens: ZeroOrMore = 16
    max_turn_tokens: ZeroOrMore = 0
    stop: tuple[str, ...] = ()
    top_k: ZeroOrMore = 0
    max_turns: AtLeastOne | None = None
    tools: tuple[str, ...] = ()
    agent: AgentConfig = msgspec.field(default_factory=AgentConfig)

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Settings:
        """The settings in the JSON file ``path``.

        Raises:
            FileNotFoundError: There is no such file.
            ValueError: The file is not a settings file, naming the field that is wrong.
        """
        try:
            return msgspec.json.decode(Path(path).read_bytes(), type=cls)
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            raise ValueError(f"{path} is not an AgentFly plug-in settings file: {error}") from None

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write these settings to ``path`` as JSON (every field, indented)."""
        Path(path).write_bytes(msgspec.json.format(msgspec.json.encode(self), indent=2) + b"\n")

    @property
    def pool_backend(self) -> str:
        """``ray`` or ``local``: ``auto`` resolved in this process."""
        if self.pool != "auto":
            return self.pool
        try:
            import ray
        except ImportError:
            return "local"
        return "ray" if ray.is_initialized() else "local"


def write_plugin(directory: str | os.PathLike[str], settings: Settings) -> Path:
    """Write ``settings`` (:data:`SETTINGS_FILE`) and the agent file bound to them (:data:`AGENT_FILE_NAME`) into
    ``directory``; return the agent file. The agent file imports the program executor when ``settings.agent`` names
    a program or a command, else the env loop's executor."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    settings.write(folder / SETTINGS_FILE)
    if settings.agent.plays:
        module, name, what = "agentfly_train.backends.openrlhf.program_executor", "ProgramExecutor", "an agent program"
    else:
        module, name, what = "agentfly_train.backends.openrlhf.executor", "AgentExecutor", "the env loop"
    agent_file = folder / AGENT_FILE_NAME
    agent_file.write_text(_AGENT_FILE.format(what=what, settings=SETTINGS_FILE, module=module, name=name))
    return agent_file


E = TypeVar("E", bound="SettingsFile")


class SettingsFile:
    """What both executors share: the settings file a class is bound to (:meth:`bound`), read when an instance
    is built without settings."""

    #: The file a bound class reads its settings from; None: :class:`Settings` defaults.
    settings_file: ClassVar[Path | None] = None

    @classmethod
    def bound(cls: type[E], settings_file: str | os.PathLike[str]) -> type[E]:
        """A subclass whose no-argument constructor (OpenRLHF's ``AgentExecutor()``) reads ``settings_file``."""
        return type(cls)(cls.__name__, (cls,), {"settings_file": Path(settings_file), "__module__": cls.__module__})

    @classmethod
    def settings_or_file(cls, settings: Settings | None) -> Settings:
        """``settings`` when given, else the bound file's (defaults when the class is not bound)."""
        if settings is not None:
            return settings
        return Settings() if cls.settings_file is None else Settings.read(cls.settings_file)
