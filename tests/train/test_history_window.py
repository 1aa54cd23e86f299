"""Bounded history (``rollout.history_turns``): each turn sees the first prompt and its last K turns, and the episode
is trained as exactly those contexts.

A scripted generator records every request, so the tests compare what the model was shown with what the official
chat template renders for the windowed conversation, and each trained row with the request and reply it came from.
A property test covers the window arithmetic on arbitrary episodes; the rest checks every place the window reaches:
budgets, demonstrations (the warm start and self-imitation train on the same contexts), step credit, the loss's
per-episode aggregation, served evaluation and the config's refusals.
"""

from __future__ import annotations

import json

import msgspec
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from test_train_rollout import echo, said_done

from agentfly_env import ListTasks, ToolEnv, run_sync
from agentfly_env.resources.distributed import make_env_pool
from agentfly_train.algorithms import aggregate_loss
from agentfly_train.chat import ChatFormat
from agentfly_train.config import Config, ConfigError, RolloutConfig
from agentfly_train.evaluate import _play_served
from agentfly_train.generation import Generation
from agentfly_train.generation.openai import ChatCompletion
from agentfly_train.rollout import Episode, EpisodeStats, Rollout, Turn
from agentfly_train.sft import encode, parse_rows
from agentfly_train.training import Batch

ECHOES = ["alpha", "beta", "gamma", "delta"]  # the model's tool calls, then it answers


def echo_env(**kwargs) -> ToolEnv:
    tasks = ListTasks([{"prompt": "Echo four words, then answer done.", "answer": "done"}])
    return ToolEnv(tools=[echo], tasks=tasks, reward=said_done, system_prompt="You echo.", **kwargs)


def action_texts() -> list[str]:
    call = '<tool_call>{"name": "echo", "arguments": {"text": %s}}</tool_call>'
    return [call % json.dumps(word) for word in ECHOES] + ["<answer>done</answer>"]


class RecordingGenerator:
    """Plays the scripted turns of one episode (one chain at a time) and keeps every request it was sent."""

    def __init__(self, chat: ChatFormat) -> None:
        closing = chat.closing_id
        self.turns = [chat.content_ids(text) + [closing] for text in action_texts()]  # as a demonstration encodes
        self.requests: list[list[int]] = []
        self.replies: list[list[int]] = []

    def generate(self, requests, params):
        out = []
        for request in requests:
            tokens = self.turns[len(self.requests)]
            self.requests.append(list(request.token_ids))
            self.replies.append(tokens)
            out.append(Generation(list(tokens), [-0.1 * (i + 1) for i in range(len(tokens))], "stop"))
        return out


def play(tokenizer, history_turns: int, *, overlap: bool = True, max_episode_tokens: int = 4000):
    chat = ChatFormat(tokenizer)
    generator = RecordingGenerator(chat)
    config = RolloutConfig(
        samples_per_prompt=1,
        max_turns=8,
        max_new_tokens=100,
        max_episode_tokens=max_episode_tokens,
        history_turns=history_turns,
        overlap=overlap,
    )
    [episode] = Rollout(make_env_pool(echo_env, size=1), chat, generator, config).run([0], 0).episodes
    return episode, generator


@pytest.mark.parametrize("history_turns", [1, 2])
@pytest.mark.parametrize("overlap", [True, False])
def test_each_turn_sees_the_task_and_its_last_turns_as_the_template_renders_them(tokenizer, history_turns, overlap):
    episode, generator = play(tokenizer, history_turns, overlap=overlap)
    assert (episode.success, len(episode.turns)) == (True, 5)
    observations = [step.observation for step in episode.trajectory.steps]
    assert observations[:4] == ECHOES
    exchanges = [
        [{"role": "assistant", "content": text}, {"role": "tool", "content": observation}]
        for text, observation in zip(action_texts(), observations, strict=False)
    ]
    opening = [
        {"role": "system", "content": echo_env().system_prompt},
        {"role": "user", "content": episode.trajectory.observation},
    ]
    for turn, request in enumerate(generator.requests):
        window = exchanges[max(0, turn - history_turns) : turn]
        messages = opening + [message for exchange in window for message in exchange]
        official = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        assert tokenizer.decode(request) == official, turn

    # The whole episode is still one sequence, as without a window.
    assert episode.token_ids == play(tokenizer, 0, overlap=overlap)[0].token_ids


@pytest.mark.parametrize("history_turns", [1, 2, 3])
def test_the_episode_trains_as_the_contexts_the_model_saw(tokenizer, history_turns):
    episode, generator = play(tokenizer, history_turns)
    rows = episode.sequences
    assert len(rows) == 1 + len(episode.turns) - (history_turns + 1)  # turns 0..K share the first row
    trained = [
        (row.token_ids[:start], row.token_ids[start:end], row.logprobs[start:end])
        for row in rows
        for start, end in row.calls
    ]
    # Each reply is trained once, in the very context it was sampled in, with its own log-probs.
    assert [context for context, _, _ in trained] == [
        request[: len(context)] for request, (context, _, _) in zip(generator.requests, trained, strict=True)
    ]
    for (context, reply, logprobs), request, sent in zip(trained, generator.requests, generator.replies, strict=True):
        assert request == context[: len(request)] and reply == sent
        assert logprobs == pytest.approx([-0.1 * (i + 1) for i in range(len(sent))])
    for row in rows:  # the last call's context is its request exactly; mask 1 on the row's own replies only
        start, _ = row.calls[-1]
        assert row.token_ids[:start] in generator.requests
        masked = [i for i, bit in enumerate(row.action_mask) if bit]
        assert masked == [i for start, end in row.calls for i in range(start, end)]
    assert episode.generated_tokens == sum(len(reply) for reply in generator.replies)


def test_a_window_as_long_as_the_episode_changes_nothing(tokenizer):
    whole, _ = play(tokenizer, 0)
    long_window, generator = play(tokenizer, 4)  # 5 turns: the last sees the 4 before it, all of them
    assert long_window.sequences == [long_window] and whole.sequences == [whole]
    assert (long_window.token_ids, long_window.action_mask) == (whole.token_ids, whole.action_mask)
    assert generator.requests[-1] == whole.token_ids[: whole.turns[-1].start]


def test_the_token_budget_bounds_each_context_not_the_episode(tokenizer):
    whole, _ = play(tokenizer, 0)
    budget = len(whole.token_ids) - 10  # the whole episode does not fit
    cut, _ = play(tokenizer, 0, max_episode_tokens=budget)
    assert (cut.truncation_reason, cut.success) == ("max_tokens", False)
    windowed, generator = play(tokenizer, 1, max_episode_tokens=budget)
    assert (windowed.truncated, windowed.success) == (False, True)
    assert max(len(r) + len(g) for r, g in zip(generator.requests, generator.replies, strict=True)) < budget


def test_a_demonstration_trains_on_the_rollouts_own_windows(tokenizer):
    """The warm start and self-imitation see each turn in the context the policy will be shown."""
    chat = ChatFormat(tokenizer)
    episode, _ = play(tokenizer, 2)
    [demo] = parse_rows([msgspec.to_builtins(episode.trajectory)], source="rollout")
    encoded = encode(chat, demo, history_turns=2)
    assert [(r.token_ids, r.action_mask) for r in encoded.sequences] == [
        (r.token_ids, r.action_mask) for r in episode.sequences
    ]
    longest = max(len(r.token_ids) for r in encoded.sequences)
    with pytest.raises(Exception, match=f"{longest} tokens"):
        encode(chat, demo, history_turns=2, max_tokens=longest - 1)
    assert encode(chat, demo, history_turns=2, max_tokens=longest).sequences  # a window fits: kept


def test_step_credit_anchors_each_turn_in_the_row_that_trains_it(tokenizer):
    episode, generator = play(tokenizer, 1)
    batch = Batch.from_episodes([episode, episode], pad_id=0, device=torch.device("cpu"), anchors=True)
    assert len(batch) == 2 * len(episode.sequences)
    assert batch.episode_of.tolist() == [0] * len(episode.sequences) + [1] * len(episode.sequences)
    states = [episode.trajectory.observation, *(s.observation for s in episode.trajectory.steps)]
    for number, anchor in enumerate(batch.anchors):
        turn = number % len(episode.turns)
        assert batch.input_ids[anchor.row, anchor.start + 1 : anchor.end + 1].tolist() == generator.replies[turn]
        assert batch.action_mask[anchor.row, anchor.start : anchor.end].tolist() == [1.0] * len(generator.replies[turn])
        assert anchor.state == states[turn]


@given(
    st.lists(st.lists(st.floats(-5, 5), min_size=1, max_size=6), min_size=1, max_size=5),
    st.data(),
)
def test_seq_mean_counts_an_episode_once_however_many_rows_it_has(turn_losses, data):
    """An episode's turns in one row or each in its own (sharing the episode's token count): the same loss."""
    width = max(map(len, turn_losses))
    rows = torch.zeros(len(turn_losses), width)
    mask = torch.zeros(len(turn_losses), width)
    for i, losses in enumerate(turn_losses):
        rows[i, : len(losses)] = torch.tensor(losses)
        mask[i, : len(losses)] = 1
    one_row = aggregate_loss(rows.reshape(1, -1), mask.reshape(1, -1), "seq-mean-token-mean")
    split = aggregate_loss(
        rows, mask, "seq-mean-token-mean", sequence_tokens=mask.sum().expand(len(turn_losses)), num_sequences=1
    )
    assert float(split) == pytest.approx(float(one_row), abs=1e-5)
    assert float(split) == pytest.approx(sum(map(sum, turn_losses)) / sum(map(len, turn_losses)), abs=1e-5)


class ScriptedClient:
    """A chat server's client that plays the scripted turns and keeps the messages of every call."""

    def __init__(self) -> None:
        self.sent: list[list[dict[str, str]]] = []

    async def acomplete(self, messages, **kwargs) -> ChatCompletion:
        self.sent.append(list(messages))
        return ChatCompletion(action_texts()[len(self.sent) - 1], "stop")


@pytest.mark.parametrize("history_turns", [0, 1, 2])
def test_served_evaluation_sends_the_window_the_model_was_trained_on(history_turns):
    config = Config.from_dict({"rollout": {"history_turns": history_turns, "max_turns": 8}})
    client, episode = ScriptedClient(), EpisodeStats()

    async def evaluate_one() -> None:
        envs = make_env_pool(echo_env, size=1)
        lease = await envs.acquire(timeout=None)
        try:
            await _play_served(config, client, lease.resource, 0, episode)
        finally:
            await lease.release()
            await envs.close()

    run_sync(evaluate_one())
    assert episode.success and len(client.sent) == 5
    opening = client.sent[0]
    assert [m["role"] for m in opening] == ["system", "user"]
    observations = [step.observation for step in episode.trajectory.steps]
    exchanges = [
        [{"role": "assistant", "content": text}, {"role": "tool", "content": observation}]
        for text, observation in zip(action_texts(), observations, strict=False)
    ]
    for turn, messages in enumerate(client.sent):
        window = exchanges[max(0, turn - history_turns) : turn] if history_turns else exchanges[:turn]
        assert messages == opening + [m for exchange in window for m in exchange], turn


# ----------------------------------------------------------------------------- the window arithmetic, any episode


@st.composite
def episodes(draw):
    """An episode built as the rollout builds it, with the context recorded before each turn."""
    episode = Episode(group=0, chain=0, seed=0, history_turns=draw(st.integers(0, 5)))
    token = iter(range(1, 10**6))
    episode.append([next(token) for _ in range(draw(st.integers(1, 4)))], generated=False)
    episode.prompt_length = len(episode.token_ids)
    contexts = []
    for _ in range(draw(st.integers(0, 8))):
        contexts.append(episode.context())
        reply = [next(token) for _ in range(draw(st.integers(1, 3)))]
        episode.turns.append(Turn(len(episode.token_ids), len(episode.token_ids) + len(reply), "stop"))
        episode.append(reply, generated=True, logprobs=[-float(t) for t in reply])
        episode.append([next(token) for _ in range(draw(st.integers(0, 3)))], generated=False)
    return episode, contexts


@given(episodes())
def test_every_turn_is_trained_once_in_the_context_it_was_played_in(played):
    episode, contexts = played
    sequences, places = episode.sequences, episode.turn_places()
    assert len(places) == len(episode.turns)
    for number, (turn, (row, start, end)) in enumerate(zip(episode.turns, places, strict=True)):
        sequence = sequences[row]
        assert sequence.token_ids[:start] == contexts[number]
        assert sequence.token_ids[start:end] == episode.token_ids[turn.start : turn.end]
        assert sequence.logprobs[start:end] == episode.logprobs[turn.start : turn.end]
        assert sequence.action_mask[start:end] == [1] * (end - start)
    for row, sequence in enumerate(sequences):  # each reply masked once, in its own row, and nothing else
        assert len(sequence.token_ids) == len(sequence.action_mask) == len(sequence.logprobs)
        assert sum(sequence.action_mask) == sum(end - start for r, start, end in places if r == row)
    k = episode.history_turns
    if not k or len(episode.turns) <= k + 1:
        assert episode.sequences == [episode]
    else:
        assert len(episode.sequences) == len(episode.turns) - k


# ----------------------------------------------------------------------------- where the window is refused


def test_an_agent_program_or_another_backend_is_refused_a_history_bound(tmp_path):
    config = Config.load("calculator")
    config.rollout.history_turns = 2
    config.validate(check_model=False)
    program = tmp_path / "agent.py"
    program.write_text("def solve(env, client):\n    return 0.0\n")
    config.agent.program = f"{program}:solve"
    with pytest.raises(ConfigError, match="agent program keeps its own"):
        config.validate(check_model=False)
    config = Config.load("calculator")
    config.rollout.history_turns = 2
    config.backend = "openrlhf"
    with pytest.raises(ConfigError, match="history_turns runs on the local backend"):
        config.validate(check_model=False)
