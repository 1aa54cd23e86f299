"""``agentfly-env validate``: an env id held to its manifest, at three levels, each check passed or failed with its reason.

* **static**: the manifest is registered, typed and complete, and says what the env is: the env is made from
  its registration alone, its spaces are text spaces, and its tools, turn budget and expert are the manifest's.
* **runtime**: Gymnasium's env checker; same seed, same episode (:func:`~agentfly_env.runners.checker.check_determinism`);
  the sync API plays what the async one does; a round trip through ``agentfly-serve``'s protocol (its app, in this
  process) gives the same episode back; an env pool (:func:`~agentfly_env.resources.distributed.make_env_pool`)
  lends the env, takes it back and ends the episode its user left open; malformed turns come back as
  observations, never exceptions.
* **semantic**: the scripted expert earns the manifest's maximum reward on every one of N seeds; a do-nothing
  policy never does, and a random one stays below it on average (it may luck into a solution now and then);
  every return is within the manifest's range. An env without an expert fails: nothing shows its maximum
  can be reached.

A level runs only when the one before it passed, as OpenEnv's RFC 008 orders them: what an episode earns means
nothing of an env whose episodes do not repeat, or whose manifest says something else. The episodes that
show the runtime contracts are the expert's on :data:`REFERENCE_SEED`; the semantic level's seeds are 0..N-1.

Example:
    >>> import agentfly_env
    >>> report = validate("AgentFly/Math-v0", episodes=2)
    >>> report.passed, [(level.name, level.passed) for level in report.levels]
    (True, [('static', True), ('runtime', True), ('semantic', True)])
    >>> next(check for check in report.levels[2].checks if check.name == "expert").detail
    'returns 1, 1 on seeds 0-1 (maximum 1)'
"""

from __future__ import annotations

import asyncio
import functools
import math
import re
import time
import urllib.parse
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import msgspec
from gymnasium.utils.env_checker import check_env

from agentfly_env.core.aio import run_sync
from agentfly_env.core.env import AgentEnv, EnvStateError
from agentfly_env.core.episode import Policy, aplay_episode, play_episode
from agentfly_env.core.manifest import Manifest, manifest_of
from agentfly_env.core.policies import do_nothing, expert_action, has_expert, random_action
from agentfly_env.core.spaces import TextSpace
from agentfly_env.core.types import EpisodeSummary, Step, ToolCall, Trajectory
from agentfly_env.extras import declared_extras, requires_extra
from agentfly_env.resources.distributed import make_env_pool
from agentfly_env.runners.checker import check_determinism
from agentfly_env.serve.protocol import decode_frame, encode

__all__ = ["REFERENCE_SEED", "Check", "CheckFailed", "Level", "Report", "validate"]

#: The seed of the expert episode that the sync, served and pooled plays must repeat.
REFERENCE_SEED = 1
#: How far a return may fall short of the maximum and still reach it (rewards summed in floating point).
TOLERANCE = 1e-6
#: Hosts of package indexes: a manifest's link is the project's own page, never one of these.
PACKAGE_INDEXES = frozenset({"pypi.org", "pypi.python.org", "files.pythonhosted.org", "test.pypi.org"})
#: Longest a served session may go without an answer before the round trip fails.
SERVE_TIMEOUT_S = 300.0
#: Model turns that are no valid action in any format: an env answers each with an observation.
MALFORMED_ACTIONS = (
    "",
    " \n\t",
    "<tool_call>",
    "<tool_call>{not json}</tool_call>",
    '<tool_call>["a", "list"]</tool_call>',
    '<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>',
    "<answer>",
    "search[",
    "click[]",
    "Action:\nAction Input:",
    "\x00\x1b[31m\ufffd",
    "x" * 100_000,
)


class CheckFailed(Exception):
    """A check's verdict: what is wrong, in words for the env's author."""


class Check(msgspec.Struct, frozen=True):
    """One check's verdict: ``detail`` says what was seen (passed) or what is wrong (failed)."""

    name: str
    passed: bool
    detail: str
    seconds: float


class Level(msgspec.Struct, frozen=True):
    """One level's checks; ``skipped`` says why it did not run (a level before it failed)."""

    name: str
    passed: bool
    checks: tuple[Check, ...] = ()
    skipped: str | None = None
    seconds: float = 0.0


class Report(msgspec.Struct, frozen=True):
    """The whole verdict on one env id: it passes when every level does."""

    env_id: str
    passed: bool
    episodes: int
    levels: tuple[Level, ...]
    seconds: float


class _Subject:
    """What the checks share: the id, its manifest, one env made from the registration, the reference episode
    and the semantic level's returns."""

    def __init__(self, env_id: str, episodes: int) -> None:
        self.env_id = env_id
        self.seeds = range(episodes)
        self._manifest: Manifest | CheckFailed | None = None
        self._env: gym.Env | Exception | None = None
        self._expert_env: gym.Env | None = None
        self._episodes: dict[Policy, list[EpisodeSummary]] = {}

    @property
    def manifest(self) -> Manifest:
        """The id's manifest. The first check that asks is told why there is none; the later ones, that they need it."""
        if self._manifest is None:
            try:
                self._manifest = _load_manifest(self.env_id)
            except CheckFailed as error:
                self._manifest = CheckFailed("needs the manifest, which could not be read (see the manifest check)")
                raise error
        if isinstance(self._manifest, CheckFailed):
            raise self._manifest
        return self._manifest

    @property
    def env(self) -> AgentEnv:
        """The env as registered, made on first use: every check that does not need a fresh one shares it. The first
        check that asks for one that cannot be made is told why; the later ones, that they need it."""
        if self._env is None:
            try:
                self._env = _make(self.env_id)
            except Exception:
                self._env = CheckFailed("needs the env, which could not be made (see the env and spaces check)")
                raise
        if isinstance(self._env, Exception):
            raise self._env
        return self._env.unwrapped  # type: ignore[return-value]

    @functools.cached_property
    def reference(self) -> Trajectory:
        """The expert's episode on :data:`REFERENCE_SEED`, played through the async API (the record stays as it
        is: the env's next reset begins another)."""
        return play_episode(self.env, expert_action, seed=REFERENCE_SEED)

    def episodes(self, policy: Policy) -> list[EpisodeSummary]:
        """What ``policy``'s episodes on the semantic level's seeds came to (played once, for every check). The
        expert plays with the manifest's ``expert_turns`` where it gives one, every other policy with the env's own
        budget."""
        if policy not in self._episodes:
            env = self.expert_env if policy is expert_action else self.env
            self._episodes[policy] = [play_episode(env, policy, seed=seed).summary() for seed in self.seeds]
        return self._episodes[policy]

    @property
    def expert_env(self) -> AgentEnv:
        """The env the expert is validated on: the shared one, or one made with the manifest's ``expert_turns``."""
        if self.manifest.expert_turns is None:
            return self.env
        if self._expert_env is None:
            self._expert_env = _make(self.env_id, max_turns=self.manifest.expert_turns)
        return self._expert_env.unwrapped  # type: ignore[return-value]

    def close(self) -> None:
        for env in (self._env, self._expert_env):
            if isinstance(env, gym.Env):
                env.close()


def validate(env_id: str, *, episodes: int = 3) -> Report:
    """Run the three levels on ``env_id`` (registered already: import the plug-in that registers it first).

    Args:
        env_id: A registered id.
        episodes: Seeds (0..N-1) the semantic level plays with each policy.
    """
    if episodes < 1:
        raise ValueError(f"episodes must be at least 1, got {episodes}")
    subject = _Subject(env_id, episodes)
    started = time.perf_counter()
    levels: list[Level] = []
    try:
        for name, checks in LEVELS:
            failed = next((level.name for level in levels if not level.passed), None)
            if failed is not None:
                levels.append(Level(name, False, skipped=f"not run: the {failed} level failed"))
                continue
            level_started = time.perf_counter()
            verdicts = tuple(_run(check_name, check, subject) for check_name, check in checks)
            passed = all(verdict.passed for verdict in verdicts)
            levels.append(Level(name, passed, verdicts, seconds=time.perf_counter() - level_started))
    finally:
        subject.close()
    return Report(env_id, all(level.passed for level in levels), episodes, tuple(levels), time.perf_counter() - started)


def _run(name: str, check: Callable[[_Subject], str], subject: _Subject) -> Check:
    started = time.perf_counter()
    try:
        detail, passed = check(subject), True
    except Exception as error:  # the env under test may raise anything: each is a verdict, not a crash
        detail, passed = _why(error), False
    return Check(name, passed, detail, time.perf_counter() - started)


def _why(error: BaseException) -> str:
    if isinstance(error, CheckFailed | AssertionError) and str(error):
        return str(error)
    return f"{type(error).__name__}: {error}"


def _load_manifest(env_id: str) -> Manifest:
    try:
        manifest = manifest_of(env_id)
    except Exception as error:  # a plug-in's module may raise anything on import
        raise CheckFailed(f"its manifest could not be loaded: {_why(error)}") from error
    if manifest is None:
        raise CheckFailed(
            "no manifest: register the id with agentfly_env.register(..., manifest=...) (docs/env-catalog.md)"
        )
    return manifest


def _make(env_id: str, **overrides: Any) -> gym.Env:
    """The env from its registration alone (the one way every check makes one), with ``overrides`` only where the
    manifest asks (the expert's budget)."""
    try:
        return gym.make(env_id, **overrides)
    except (TypeError, ValueError) as error:
        raise CheckFailed(f"it cannot be made from its registration alone (it needs arguments): {error}") from error


# ---------------------------------------------------------------------------------------------- static


def _manifest_complete(subject: _Subject) -> str:
    manifest = subject.manifest
    try:
        msgspec.convert(msgspec.to_builtins(manifest), Manifest)
    except msgspec.ValidationError as error:
        raise CheckFailed(f"a field has the wrong type: {error}") from error
    problems = [f"its id is {manifest.id!r}"] if manifest.id != subject.env_id else []
    texts = {
        "family": manifest.family,
        "description": manifest.description,
        "reward.measures": manifest.reward.measures,
        "reward.paid": manifest.reward.paid,
        "reward.success": manifest.reward.success,
        **{
            f"data[{n}].{field}": getattr(data, field)
            for n, data in enumerate(manifest.data)
            for field in data.__struct_fields__
        },
    }
    empty = [name for name, text in texts.items() if not text.strip()]
    if empty:
        problems.append(f"empty: {', '.join(empty)}")
    if "\n" in manifest.description.strip():
        problems.append("the description is more than one line")
    low, high = manifest.reward.range
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        problems.append(f"the reward range {low}..{high} is not a finite interval")
    if manifest.max_turns < 1:
        problems.append(f"the turn budget is {manifest.max_turns}")
    if manifest.expert_turns is not None and manifest.expert_turns <= manifest.max_turns:
        problems.append(
            f"the expert's budget {manifest.expert_turns} is not above the turn budget {manifest.max_turns}"
        )
    if manifest.benchmark is not None and manifest.link is None:
        problems.append("the benchmark has no link")
    if manifest.link is not None:
        address = urllib.parse.urlsplit(manifest.link)
        if address.scheme not in ("http", "https") or not address.hostname:
            problems.append(f"the link {manifest.link!r} is not a web address")
        elif address.hostname in PACKAGE_INDEXES:
            problems.append(f"the link {manifest.link!r} is a package index, not the project's own page")
    unnamed = [n for n, schema in enumerate(manifest.tools) if not schema.get("function", {}).get("name")]
    if unnamed:
        problems.append(f"tools {unnamed} are not OpenAI function schemas (no function.name)")
    if manifest.extra is not None:
        declared = declared_extras(manifest.distribution)
        if declared is not None and manifest.extra not in declared:
            problems.append(
                f"{manifest.distribution} declares no extra {manifest.extra!r} (it has {', '.join(declared)})"
            )
    if problems:
        raise CheckFailed("; ".join(problems))
    return f"{manifest.family}: every field given"


def _env_and_spaces(subject: _Subject) -> str:
    env = subject.env
    if not isinstance(env, AgentEnv):
        raise CheckFailed(f"{type(env).__name__} is not an AgentEnv")
    for name in ("observation_space", "action_space"):
        space = getattr(env, name)
        if not isinstance(space, TextSpace):
            raise CheckFailed(f"its {name} is a {type(space).__name__}, not a TextSpace (model text)")
    sample = env.action_space.sample()
    if sample not in env.action_space:
        raise CheckFailed(f"its action space samples {sample[:80]!r}, which it does not contain")
    return f"{type(env).__name__}: text observations and actions"


def _tools(subject: _Subject) -> str:
    listed, offered = subject.manifest.tools, tuple(subject.env.tool_schemas)
    names = [schema["function"]["name"] for schema in offered]
    if list(subject.manifest.tool_names) != names:
        raise CheckFailed(f"the manifest lists tools {list(subject.manifest.tool_names)}, the env offers {names}")
    differ = [name for name, mine, theirs in zip(names, listed, offered) if mine != theirs]
    if differ:
        raise CheckFailed(f"the schemas of {', '.join(differ)} differ from the env's")
    sampled = sorted({spec.name for spec in getattr(subject.env.action_space, "tools", ())} - set(names))
    if sampled:
        raise CheckFailed(f"its action space calls tools the manifest does not list: {', '.join(sampled)}")
    return f"{len(names)} tool{'s' if len(names) != 1 else ''}, schemas as the env's: {', '.join(names) or 'none'}"


def _turn_budget(subject: _Subject) -> str:
    if subject.env.max_turns != subject.manifest.max_turns:
        raise CheckFailed(f"the manifest says {subject.manifest.max_turns} turns, the env has {subject.env.max_turns}")
    return f"{subject.env.max_turns} turns"


def _expert_declared(subject: _Subject) -> str:
    declared, offered = subject.manifest.expert is not None, has_expert(subject.env)
    if declared and not offered:
        raise CheckFailed("the manifest describes an expert, but the env has no expert_action()")
    if offered and not declared:
        raise CheckFailed("the env has an expert_action(), but the manifest says it has none")
    return "an expert_action()" if offered else "no expert, as the manifest says"


# ---------------------------------------------------------------------------------------------- runtime


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _gymnasium_checker(subject: _Subject) -> str:
    env = _make(subject.env_id)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env.unwrapped, skip_render_check=False)
    finally:
        env.close()
    found = [_ANSI.sub("", str(warning.message)) for warning in caught if "WARN: " in str(warning.message)]
    if found:
        raise CheckFailed(f"Gymnasium's checker warned: {' | '.join(found)}")
    return "check_env passed without a warning"


def _same_seed_same_episode(subject: _Subject) -> str:
    try:
        check_determinism(subject.env_id, seed=REFERENCE_SEED)
    except AssertionError as error:
        if subject.manifest.seeded:
            raise
        raise CheckFailed(f"{error} (the manifest says so, seeded=False; every AgentFly env must be seeded)") from error
    return "two fresh envs played the same expert and random episodes"


def _sync_equals_async(subject: _Subject) -> str:
    env, reference = subject.env, subject.reference
    # The sync API's own loop (reset/step), where the reference went through areset/astep.
    env.reset(seed=REFERENCE_SEED)
    env.action_space.seed(REFERENCE_SEED)
    done = False
    while not done:
        _, _, terminated, truncated, _ = env.step(expert_action(env))
        done = terminated or truncated
    assert env.trajectory is not None
    _same_episode(env.trajectory, reference, "the sync play")
    return f"{len(reference.steps)} steps alike"


def _same_episode(played: Trajectory, reference: Trajectory, what: str) -> None:
    """Fails, naming the first difference, unless ``played`` repeats the reference episode."""
    if played.observation != reference.observation:
        raise CheckFailed(f"{what} starts with another observation than the async play")
    for number, (step, expected) in enumerate(zip(played.steps, reference.steps), 1):
        if step != expected:
            raise CheckFailed(f"{what} differs at step {number}: {_first_difference(step, expected)}")
    if len(played.steps) != len(reference.steps):
        raise CheckFailed(f"{what} took {len(played.steps)} steps, the async play {len(reference.steps)}")


def _first_difference(step: Step, expected: Step) -> str:
    for field in step.__struct_fields__:
        mine, theirs = getattr(step, field), getattr(expected, field)
        if mine != theirs:
            return f"{field} is {_short(mine)}, expected {_short(theirs)}"
    return "the records differ"


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}..."


def _serve_round_trip(subject: _Subject) -> str:
    reference = subject.reference
    frames = run_sync(_served_frames(subject.env_id, [step.action for step in reference.steps]))
    for number, frame in enumerate(frames):
        if frame.get("type") != "observation":
            raise CheckFailed(f"the server answered message {number + 1} with {_short(frame, 300)}")
    observation = frames[0]["data"]["observation"]
    if observation["text"] != reference.observation:
        raise CheckFailed("the served reset observation differs from the local one")
    for number, (frame, expected) in enumerate(zip(frames[1:], reference.steps), 1):
        served = msgspec.convert(frame["data"]["observation"]["info"]["step"], Step)
        if served != expected:
            raise CheckFailed(f"served step {number} differs: {_first_difference(served, expected)}")
        if frame["data"]["reward"] != expected.reward or frame["data"]["observation"]["text"] != expected.observation:
            raise CheckFailed(f"served step {number}'s frame does not carry its record's reward and observation")
    return f"a reset and {len(reference.steps)} steps over /ws gave the local episode back"


async def _served_frames(env_id: str, actions: Sequence[str]) -> list[dict[str, Any]]:
    """What ``agentfly-serve``'s app answers one WebSocket session that resets with :data:`REFERENCE_SEED` and
    steps ``actions``: the app run in this process (its lifespan, then raw ASGI messages), on this loop, so the
    envs it pools share the backends (JVMs, engines, sandboxes) of the envs made here."""
    with requires_extra("serve", "starlette", "uvicorn", feature="agentfly-env validate's serve round trip"):
        from agentfly_env.serve.server import ServeConfig, create_app
    app = create_app(env_id, config=ServeConfig(max_sessions=1, idle_timeout_s=None))
    lifespan = _AsgiPeer(app, {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}})
    await lifespan.say({"type": "lifespan.startup"}, expect="lifespan.startup.complete")
    try:
        session = _AsgiPeer(app, _WEBSOCKET_SCOPE)
        await session.say({"type": "websocket.connect"}, expect="websocket.accept")
        messages = [{"type": "reset", "data": {"seed": REFERENCE_SEED}}]
        messages += [{"type": "step", "data": {"message": action}} for action in actions]
        frames = []
        for message in messages:
            answer = await session.say({"type": "websocket.receive", "text": encode(message)}, expect="websocket.send")
            frames.append(decode_frame(answer["text"]))
        await session.say({"type": "websocket.receive", "text": encode({"type": "close"})}, expect="websocket.close")
        await session.finished()
    finally:
        await lifespan.say({"type": "lifespan.shutdown"}, expect="lifespan.shutdown.complete")
        await lifespan.finished()
    return frames


#: A loopback WebSocket handshake on ``/ws``, as the request guard lets one in.
_WEBSOCKET_SCOPE = {
    "type": "websocket",
    "asgi": {"version": "3.0"},
    "scheme": "ws",
    "path": "/ws",
    "raw_path": b"/ws",
    "root_path": "",
    "query_string": b"",
    "headers": [(b"host", b"127.0.0.1")],
    "client": ("127.0.0.1", 50000),
    "server": ("127.0.0.1", 8000),
    "subprotocols": [],
}


class _AsgiPeer:
    """One ASGI connection to ``app``, played from the client's side: say a message, read the app's answer."""

    def __init__(self, app: Any, scope: dict[str, Any]) -> None:
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.task = asyncio.ensure_future(app(scope, self.inbox.get, self.outbox.put))

    async def say(self, message: dict[str, Any], *, expect: str) -> dict[str, Any]:
        await self.inbox.put(message)
        answer = await asyncio.wait_for(self.outbox.get(), SERVE_TIMEOUT_S)
        if answer["type"] != expect:
            raise CheckFailed(f"the app answered {message['type']} with {_short(answer, 300)}, not {expect}")
        return answer

    async def finished(self) -> None:
        await asyncio.wait_for(self.task, SERVE_TIMEOUT_S)


def _pool_lends_and_takes_back(subject: _Subject) -> str:
    return run_sync(_pooled(subject.env_id, subject.reference))


async def _pooled(env_id: str, reference: Trajectory) -> str:
    async with make_env_pool(env_id, size=1) as pool:
        async with pool.lease() as env:
            lent = env
            _same_episode(await aplay_episode(env, expert_action, seed=REFERENCE_SEED), reference, "the pooled env")
            await env.areset(seed=REFERENCE_SEED)  # an episode its user leaves open
        stats = pool.stats()
        if stats.in_use or stats.idle != 1 or stats.failures:
            raise CheckFailed(
                f"after one lease the pool holds {stats.in_use} in use, {stats.idle} idle, {stats.failures} failures"
            )
        async with pool.lease() as env:
            if env is not lent:
                raise CheckFailed("the pool made a second env rather than lend the first one again")
            try:
                await env.astep(do_nothing(env))
            except EnvStateError:
                pass
            else:
                raise CheckFailed(
                    "the episode its last user left open could still be stepped after the pool lent it again"
                )
    stats = pool.stats()
    if stats.alive or stats.created != stats.destroyed:
        raise CheckFailed(
            f"the closed pool still holds {stats.alive} envs ({stats.created} made, {stats.destroyed} closed)"
        )
    return (
        f"leased twice, the same env, its open episode ended in between; {stats.created} made, {stats.destroyed} closed"
    )


def _bad_actions_are_observations(subject: _Subject) -> str:
    env = subject.env
    actions = [*MALFORMED_ACTIONS, *_malformed_calls(env, subject.manifest.tool_names)]
    done = True
    for action in actions:
        if done:
            env.reset(seed=REFERENCE_SEED)
        try:
            observation, _, terminated, truncated, _ = env.step(action)
        except Exception as error:
            raise CheckFailed(f"step({_short(action, 60)}) raised {type(error).__name__}: {error}") from error
        if not isinstance(observation, str):
            raise CheckFailed(f"step({_short(action, 60)}) answered a {type(observation).__name__}, not text")
        done = terminated or truncated
    return f"{len(actions)} malformed turns, each answered with an observation"


def _malformed_calls(env: AgentEnv, tools: Sequence[str]) -> list[str]:
    """Calls of each tool with arguments it does not take, in the hermes format and in the env's own."""
    calls = [ToolCall(name, {"no_such_argument": [1, {"x": None}]}) for name in tools]
    calls += [ToolCall(name, "not an object") for name in tools]
    texts = [
        f'<tool_call>{{"name": "{call.name}", "arguments": {encode(call.arguments)}}}</tool_call>' for call in calls
    ]
    parser = getattr(env, "parser", None)  # a ToolEnv's own format (WebShop's search[...], a command line, ...)
    if parser is not None:
        for call in calls:
            try:
                texts.append(parser.format_call(call))
            except Exception:  # a format that cannot write such a call: the hermes forms stand
                continue
    return texts


# ---------------------------------------------------------------------------------------------- semantic


def _expert_reaches_the_maximum(subject: _Subject) -> str:
    if not has_expert(subject.env):
        raise CheckFailed("no scripted expert (expert_action()): nothing shows the maximum reward can be reached")
    best = subject.manifest.reward.max
    episodes = subject.episodes(expert_action)
    short = [
        f"seed {seed}: {_ending(episode)}"
        for seed, episode in zip(subject.seeds, episodes)
        if episode.reward < best - TOLERANCE
    ]
    if short:
        raise CheckFailed(f"the expert's return stays below the maximum {best:g} on {', '.join(short)}")
    reached = f"returns {_listed(episodes)} on seeds {_seeds(subject)} (maximum {best:g})"
    manifest = subject.manifest
    if manifest.expert_turns is None:
        return reached
    longest = max(episode.turns for episode in episodes)
    return f"{reached} with the expert's budget of {manifest.expert_turns} turns (longest {longest}; the env's {manifest.max_turns})"


def _doing_nothing_earns_less(subject: _Subject) -> str:
    best = subject.manifest.reward.max
    episodes = subject.episodes(do_nothing)
    reached = [seed for seed, episode in zip(subject.seeds, episodes) if episode.reward >= best - TOLERANCE]
    if reached:
        raise CheckFailed(f"empty turns earn the maximum {best:g} on seeds {reached}")
    return f"returns {_listed(episodes)}, below {best:g}"


def _random_earns_less(subject: _Subject) -> str:
    best = subject.manifest.reward.max
    episodes = subject.episodes(random_action)
    mean = sum(episode.reward for episode in episodes) / len(episodes)
    if mean >= best - TOLERANCE:
        raise CheckFailed(f"random turns earn {mean:.4g} on average, the maximum {best:g}")
    return f"returns {_listed(episodes)} (mean {mean:.3g}), below {best:g}"


def _returns_in_range(subject: _Subject) -> str:
    low, high = subject.manifest.reward.range
    played = {"expert": expert_action, "do-nothing": do_nothing, "random": random_action}
    if not has_expert(subject.env):
        del played["expert"]
    outside = [
        f"{name} on seed {seed}: {episode.reward:.4g}"
        for name, policy in played.items()
        for seed, episode in zip(subject.seeds, subject.episodes(policy))
        if not low - TOLERANCE <= episode.reward <= high + TOLERANCE
    ]
    if outside:
        raise CheckFailed(f"returns outside the manifest's range {low:g}..{high:g}: {', '.join(outside)}")
    return f"{len(played) * len(subject.seeds)} returns within {low:g}..{high:g}"


def _listed(episodes: Sequence[EpisodeSummary]) -> str:
    return ", ".join(f"{episode.reward:.4g}" for episode in episodes)


def _ending(episode: EpisodeSummary) -> str:
    """``0.5``, or ``0 (truncated: max_turns)`` for an episode that was cut (the turn budget, a dead backend)."""
    cut = f" (truncated: {episode.truncation_reason})" if episode.truncated else ""
    return f"{episode.reward:.4g}{cut}"


def _seeds(subject: _Subject) -> str:
    seeds = subject.seeds
    return str(seeds.start) if len(seeds) == 1 else f"{seeds.start}-{seeds.stop - 1}"


#: The levels, in order, and their checks.
LEVELS: tuple[tuple[str, tuple[tuple[str, Callable[[_Subject], str]], ...]], ...] = (
    (
        "static",
        (
            ("manifest", _manifest_complete),
            ("env and spaces", _env_and_spaces),
            ("tools", _tools),
            ("turn budget", _turn_budget),
            ("expert declared", _expert_declared),
        ),
    ),
    (
        "runtime",
        (
            ("gymnasium checker", _gymnasium_checker),
            ("same seed, same episode", _same_seed_same_episode),
            ("sync equals async", _sync_equals_async),
            ("serve round trip", _serve_round_trip),
            ("pool lends and takes back", _pool_lends_and_takes_back),
            ("bad actions are observations", _bad_actions_are_observations),
        ),
    ),
    (
        "semantic",
        (
            ("expert", _expert_reaches_the_maximum),
            ("do-nothing", _doing_nothing_earns_less),
            ("random", _random_earns_less),
            ("returns in range", _returns_in_range),
        ),
    ),
)
