"""An episode's model calls recorded as token rows, token-exact, and the episode's counters.

The rule: a call whose prompt tokens start with one of the episode's rows exactly (its prompts and
completions so far) extends that row; the prompt's new tokens get mask 0 and the sampled completion
mask 1 with its log-probs. Any other call starts a new row. Rows are built only from the prompt ids
the chat template gives and the ids the generator sampled: nothing is decoded and re-tokenized, and
only sampled tokens ever get mask 1, so an assistant message the program edited or wrote itself is
prompt text (mask 0) by construction. A turn of the model's that the program sends back unchanged is
put into the next prompt as the ids it sampled (:attr:`EpisodeRecording.sampled_turns`), so a tool
loop stays one row whatever tokenization the model sampled or form it wrote its calls in.

A new row counts as a *prefix mismatch* when its prompt continues a conversation the episode already
had but not as the model wrote it: the prompt starts with an earlier call's prompt, goes on past it, and
leaves that call's completion (an edited assistant message, a template that strips earlier reasoning,
a turn cut at a stop string, whose returned text lacks it). A sub-agent's own conversation, or the same
prompt sent again, starts a new row without being a mismatch.

Example:
    >>> recording = EpisodeRecording()
    >>> recording.record([1, 2, 3], Generation([4, 5], [-0.1, -0.2], "stop"))
    0
    >>> recording.record([1, 2, 3, 4, 5, 6], Generation([7], [-0.3], "stop"))  # continues row 0
    0
    >>> row = recording.rows[0]
    >>> row.token_ids, row.action_mask, row.logprobs
    ([1, 2, 3, 4, 5, 6, 7], [0, 0, 0, 1, 1, 0, 1], [0.0, 0.0, 0.0, -0.1, -0.2, 0.0, -0.3])
    >>> recording.record([1, 2, 3, 9], Generation([8], [-0.4], "stop"))  # left the first completion
    1
    >>> recording.counters.prefix_mismatches, recording.counters.rows
    (1, 2)

A forced opening (``tool_choice`` required) ends its call's prompt but is the model's turn: a prompt that leaves
it is a mismatch too, and the same prompt sent again is not.

    >>> forced = EpisodeRecording()
    >>> forced.record([1, 2, 30, 31], Generation([4], [-0.1], "stop"), opening=2)
    0
    >>> forced.record([1, 2, 30, 31], Generation([4], [-0.1], "stop"), opening=2)  # sent again
    1
    >>> forced.record([1, 2, 30, 9, 9], Generation([5], [-0.2], "stop"), opening=2)  # rewrote the turn
    2
    >>> forced.counters.prefix_mismatches, forced.counters.rows
    (1, 3)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentfly_train.generation import Generation


@dataclass
class Row:
    """One token sequence of an episode, in the shape of :class:`~agentfly_train.rollout.Episode`'s.

    Attributes:
        token_ids: Prompts and completions, in order.
        action_mask: 1 for each sampled token, 0 for the rest.
        logprobs: The generator's log-prob of each sampled token; 0.0 elsewhere.
        calls: ``(prompt_end, completion_end)`` of each call the row holds, as indices into ``token_ids``.
        openings: Per call, the tokens of its forced opening (``tool_choice`` required or named), which end its
            prompt: the model's turn starts that many tokens before ``prompt_end``.
        mismatch: Whether the row began with a prefix mismatch.
    """

    token_ids: list[int] = field(default_factory=list)
    action_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    calls: list[tuple[int, int]] = field(default_factory=list)
    openings: list[int] = field(default_factory=list)
    mismatch: bool = False

    def add_call(self, prompt: list[int], generation: Generation, opening: int = 0) -> None:
        """Append a call whose prompt starts with this row: the prompt's new tokens, then the sampled ones
        (``opening``: how many of the prompt's last tokens are the turn's forced opening)."""
        new_prompt = prompt[len(self.token_ids) :]
        self.token_ids += new_prompt + generation.token_ids
        self.action_mask += [0] * len(new_prompt) + [1] * len(generation.token_ids)
        self.logprobs += [0.0] * len(new_prompt) + list(generation.logprobs)
        self.calls.append((len(prompt), len(self.token_ids)))
        self.openings.append(opening)

    def continued_by(self, prompt: list[int]) -> bool:
        """Whether ``prompt`` starts with this whole row."""
        return len(prompt) >= len(self.token_ids) and prompt[: len(self.token_ids)] == self.token_ids

    def left_by(self, prompt: list[int]) -> bool:
        """Whether ``prompt`` goes on from one of this row's prompts without that call's turn (its forced opening and
        its completion)."""
        shared = _common_prefix(prompt, self.token_ids)
        return any(
            shared >= start - opening and len(prompt) > start and shared < end
            for (start, end), opening in zip(self.calls, self.openings, strict=True)
        )


@dataclass
class EpisodeCounters:
    """What an episode's calls came to.

    Attributes:
        calls: Chat completions answered (those cut by the context window included).
        sampled_calls: Calls that sampled tokens (and were recorded): what the token counts are over.
        rows: Token rows.
        prefix_mismatches: Rows that began because a conversation did not continue as the model wrote it.
        prompt_tokens: Prompt tokens over all calls.
        completion_tokens: Sampled tokens over all calls.
        tool_calls: Tool calls the model made (returned as ``tool_calls``), whatever tool they name.
        cut_calls: Calls that ended at the token budget or the context window (``finish_reason="length"``).
        over_budget: Whether a call was cut or refused because the episode's rows reached the episode's token
            budget (:attr:`~agentfly_train.gateway.GatewaySettings.max_episode_tokens`): the episode is over.
        added_latency_s: Per call, the seconds spent in the gateway outside the generator.
    """

    calls: int = 0
    sampled_calls: int = 0
    rows: int = 0
    prefix_mismatches: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_calls: int = 0
    cut_calls: int = 0
    over_budget: bool = False
    added_latency_s: list[float] = field(default_factory=list)


@dataclass
class EpisodeRecording:
    """The rows and counters of one episode.

    Attributes:
        rows: The episode's token rows.
        counters: What its calls came to.
        sampled_turns: Each answered call's returned assistant message, as the chat template is given it
            (:meth:`~agentfly_train.gateway.rendering.ChatRenderer.turn_text`), to the ids the model
            sampled for it (its end-of-turn token left out): what the renderer puts in for that message
            when the program sends it back unchanged. Two calls that returned the same message: the later's.
    """

    rows: list[Row] = field(default_factory=list)
    counters: EpisodeCounters = field(default_factory=EpisodeCounters)
    sampled_turns: dict[str, list[int]] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        """Tokens the rows hold: what the update trains on, and what the episode's budget counts."""
        return sum(len(row.token_ids) for row in self.rows)

    def tokens_with(self, prompt: list[int]) -> int:
        """:attr:`tokens` once ``prompt`` is recorded (before its completion): a prompt that continues a row adds
        its new tokens, any other a row of its own."""
        continued = [len(row.token_ids) for row in self.rows if row.continued_by(prompt)]
        return self.tokens + len(prompt) - max(continued, default=0)

    def record(self, prompt: list[int], generation: Generation, opening: int = 0) -> int:
        """Record a sampled call (``opening``: the tokens of its forced opening, which end ``prompt``); returns the
        index of the row it went into."""
        self.counters.sampled_calls += 1
        self.counters.prompt_tokens += len(prompt)
        self.counters.completion_tokens += len(generation.token_ids)
        continued = [i for i, row in enumerate(self.rows) if row.continued_by(prompt)]
        if continued:
            index = max(continued, key=lambda i: len(self.rows[i].token_ids))
        else:
            mismatch = any(row.left_by(prompt) for row in self.rows)
            self.rows.append(Row(mismatch=mismatch))
            self.counters.rows += 1
            self.counters.prefix_mismatches += mismatch
            index = len(self.rows) - 1
        self.rows[index].add_call(prompt, generation, opening)
        return index


def _common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n
