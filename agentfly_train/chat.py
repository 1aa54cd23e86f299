"""Token pieces of a chat template, so that a multi-turn episode is built by appending tokens.

The rollout never decodes and re-tokenizes the history: the prompt is tokenized once, the model's
tokens are kept as generated, and each env observation becomes a tool (or user) turn that is tokenized
once and appended. :class:`ChatFormat` learns from the tokenizer's own chat template, by rendering
conversations with sentinel contents, which text goes around each message: what closes the model's
turn and opens the tool turn, and what closes that and opens the next model turn. Template text is
tokenized normally (its special tokens become their ids); message contents are tokenized with
``split_special_tokens=True``, so an observation that *contains* ``<|im_end|>`` stays plain text and
cannot end a turn or fake a role.

For SmolLM2 (ChatML) an observation becomes ``<|im_end|>\\n<|im_start|>tool\\n{text}<|im_end|>\\n
<|im_start|>assistant\\n``; when the model ended its turn with ``<|im_end|>`` itself, that token is
its own (it was generated) and only the rest is appended.

Example:
    >>> from transformers import PreTrainedTokenizerFast  # doctest: +SKIP
    >>> chat = ChatFormat(tokenizer)  # doctest: +SKIP
    >>> prompt = chat.encode_prompt("You are terse.", "2 + 2?")  # doctest: +SKIP
    >>> continuation = chat.encode_observation("4", generated=[...])  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import re
from typing import Any

_SENTINELS = ("AGENTFLYSENTINELA", "AGENTFLYSENTINELB", "AGENTFLYSENTINELC", "AGENTFLYSENTINELD")


def first_messages(system_prompt: str | None, observation: str) -> list[dict[str, str]]:
    """The messages every episode opens with: the env's system prompt (when it has one), then its first
    observation as the user's message. The one rule for the trainer, the prompt export and served eval.

    Example:
        >>> [m["role"] for m in first_messages("Be brief.", "2 + 2?")], first_messages(None, "2 + 2?")
        (['system', 'user'], [{'role': 'user', 'content': '2 + 2?'}])
    """
    return ([{"role": "system", "content": system_prompt}] if system_prompt else []) + [
        {"role": "user", "content": observation}
    ]


class ChatTemplateError(ValueError):
    """The tokenizer's chat template cannot be split into per-message pieces for this role."""


class ChatFormat:
    """Token pieces of one tokenizer's chat template.

    Args:
        tokenizer: A transformers tokenizer with a chat template.
        observation_role: The role an env observation is appended as: ``tool`` or ``user``.

    Attributes:
        end_of_turn_ids: Token ids that end a model turn when generated (the template's closing token,
            e.g. ``<|im_end|>``, and the tokenizer's EOS).
    """

    def __init__(self, tokenizer: Any, observation_role: str = "tool") -> None:
        if getattr(tokenizer, "chat_template", None) is None:
            raise ChatTemplateError("the tokenizer has no chat template; pick an instruct/chat model")
        self.tokenizer = tokenizer
        self.observation_role = observation_role
        # Each text tokenized once: a system prompt, a tool list and the template's pieces recur in every call.
        self._tokenized = functools.lru_cache(maxsize=4096)(self._tokenize)
        user, answer, observation = _SENTINELS[:3]
        head = self._render([{"role": "user", "content": user}, {"role": "assistant", "content": answer}], False)
        try:
            full = self._render(
                [
                    {"role": "user", "content": user},
                    {"role": "assistant", "content": answer},
                    {"role": observation_role, "content": observation},
                ],
                True,
            )
        except Exception as error:  # jinja raises for roles a template does not know
            raise ChatTemplateError(
                f"the chat template cannot render a {observation_role!r} message ({error}); "
                "set rollout.observation_role = 'user'"
            ) from error
        answer_at = head.find(answer)
        if answer_at < 0 or not full.startswith(head[: answer_at + len(answer)]) or full.count(observation) != 1:
            raise ChatTemplateError(
                f"the chat template does not render a {observation_role!r} turn after an assistant turn verbatim; "
                "set rollout.observation_role = 'user'"
            )
        after_answer = full[answer_at + len(answer) :]
        #: Text between the model's content and the observation: closes the model turn, opens the tool turn.
        self.between = after_answer[: after_answer.index(observation)]
        #: Text after the observation: closes the tool turn and opens the next model turn.
        self.after = after_answer[after_answer.index(observation) + len(observation) :]
        self._between_ids = self.template_ids(self.between)
        self._after_ids = self.template_ids(self.after)
        if not self._between_ids:
            raise ChatTemplateError("the chat template puts nothing between an assistant turn and the next message")
        end_of_turn = {self._between_ids[0]} if self._between_ids[0] in set(tokenizer.all_special_ids) else set()
        if tokenizer.eos_token_id is not None:
            end_of_turn.add(tokenizer.eos_token_id)
        if not end_of_turn:
            raise ChatTemplateError("cannot tell which token ends a model turn (no special closing token, no EOS)")
        self.end_of_turn_ids: frozenset[int] = frozenset(end_of_turn)
        self._closing_text = tokenizer.decode(self._between_ids[:1])
        if not self.between.startswith(self._closing_text):
            raise ChatTemplateError(
                f"the template's turn closing {self.between!r} does not start with its first token's text"
            )
        self._end_of_turn_texts = sorted({tokenizer.decode([i]) for i in end_of_turn} - {""}, key=len, reverse=True)
        specials = sorted({t for t in tokenizer.all_special_tokens if len(t) > 1}, key=len, reverse=True)
        self._special = re.compile("|".join(map(re.escape, specials))) if specials else None

    # ----------------------------------------------------------------- encoding

    def encode_prompt(self, system: str | None, user: str) -> list[int]:
        """The first prompt: an optional system message, the user message and the model turn's opening."""
        return self.encode_messages(first_messages(system, user), add_generation_prompt=True)

    def encode_messages(self, messages: list[dict[str, str]], *, add_generation_prompt: bool) -> list[int]:
        """Messages as the template renders them; contents cannot produce special tokens."""
        if len(messages) > len(_SENTINELS):
            raise ValueError(f"at most {len(_SENTINELS)} messages can be encoded at once")
        placeholders = [{**m, "content": sentinel} for m, sentinel in zip(messages, _SENTINELS, strict=False)]
        rendered = self._render(placeholders, add_generation_prompt)
        ids: list[int] = []
        for message, sentinel in zip(messages, _SENTINELS, strict=False):
            at = rendered.find(sentinel)
            if at < 0:
                raise ChatTemplateError(f"the chat template drops the content of a {message['role']!r} message")
            ids += self.template_ids(rendered[:at]) + self.content_ids(message["content"])
            rendered = rendered[at + len(sentinel) :]
        return ids + self.template_ids(rendered)

    def encode_observation(self, text: str, generated: list[int]) -> list[int]:
        """Tokens to append after a model turn (``generated``) to add ``text`` as the observation turn.

        The model's own end-of-turn token, when it generated one, is not repeated.
        """
        between = self._between_ids[1:] if self._closed_by(generated) else self._between_ids
        return between + self.content_ids(text) + self._after_ids

    def observation_text(self, text: str, generated: list[int]) -> str:
        """:meth:`encode_observation` as text, for trainers that tokenize the continuation themselves.

        OpenRLHF's agent loop tokenizes what the env returns with special tokens parsed, so special-token
        strings inside ``text`` are broken with a zero-width space: an observation cannot end a turn.
        """
        between = self.between[len(self._closing_text) :] if self._closed_by(generated) else self.between
        return between + self.plain_text(text) + self.after

    def plain_text(self, text: str) -> str:
        """``text`` with every special-token string broken (``<|im_end|>`` -> ``<\u200b|im_end|>``)."""
        return self._special.sub(lambda match: match[0][0] + "\u200b" + match[0][1:], text) if self._special else text

    def strip_end_of_turn(self, text: str) -> str:
        """``text`` without a trailing end-of-turn token string (engines that decode special tokens leave it)."""
        for closing in self._end_of_turn_texts:
            if text.endswith(closing):
                return text[: -len(closing)]
        return text

    @property
    def closing_id(self) -> int:
        """The token a model generates to end its turn in this template (``<|im_end|>`` for ChatML)."""
        first = self._between_ids[0]
        return first if first in self.end_of_turn_ids else min(self.end_of_turn_ids)

    def _closed_by(self, generated: list[int]) -> bool:
        """Whether the model ended its turn with the template's own closing token."""
        return bool(generated) and generated[-1] in self.end_of_turn_ids and generated[-1] == self._between_ids[0]

    def content_ids(self, text: str) -> list[int]:
        """A message content as plain text tokens (special-looking text is not turned into special tokens)."""
        return list(self._tokenized(text, True))

    def template_ids(self, text: str) -> list[int]:
        """Text tokenized as template text: special-token strings become their ids (as OpenRLHF's agent
        loop tokenizes an env's feedback)."""
        return list(self._tokenized(text, False)) if text else []

    def _tokenize(self, text: str, split_special_tokens: bool) -> tuple[int, ...]:
        ids = self.tokenizer(text, add_special_tokens=False, split_special_tokens=split_special_tokens)["input_ids"]
        return tuple(ids)

    def _render(self, messages: list[dict[str, str]], add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)
