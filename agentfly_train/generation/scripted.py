"""A scripted model: a Python function that reads the prompt and says what the model answers.

It stands where the policy's generator stands, so an agent program run through the gateway against it
records rows exactly as a real model's would be recorded: the chat template's prompt tokens, then the
script's answer as content tokens closed by the template's end-of-turn token (mask 1). That is how an
agent program's warm start gets demonstrations in the program's own format (its prompts, its tools, its
control flow): ``agent.expert`` names the script, and the program plays the tasks against it.

The script takes the prompt as text (the decoded prompt tokens, special tokens included, e.g. SmolLM2's
``<|im_start|>user\\n...``) and returns the answer text.

Example:
    >>> generator = ScriptedGenerator(chat, lambda prompt: "4" if "2 + 2" in prompt else "?")  # doctest: +SKIP
    >>> generator.generate([GenerationRequest(prompt_ids, 32, seed=0)], params)[0].token_ids  # doctest: +SKIP
    [19, 2]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentfly_train.chat import ChatFormat
from agentfly_train.generation import Generation, GenerationRequest, SamplingParams


class ScriptedGenerator:
    """Answers each request with ``script(prompt text)``, as tokens closed by the end-of-turn token.

    Args:
        chat: The policy's chat format (its tokenizer and end-of-turn token).
        script: The prompt's text to the answer's text.
    """

    def __init__(self, chat: ChatFormat, script: Callable[[str], str]) -> None:
        self.chat = chat
        self.script = script

    def generate(self, requests: Sequence[GenerationRequest], params: SamplingParams) -> list[Generation]:
        out = []
        for request in requests:
            prompt = self.chat.tokenizer.decode(request.token_ids, skip_special_tokens=False)
            tokens = self.chat.content_ids(self.script(prompt)) + [self.chat.closing_id]
            cut = len(tokens) > request.max_new_tokens
            tokens = tokens[: request.max_new_tokens]
            out.append(Generation(tokens, [0.0] * len(tokens), "length" if cut else "stop"))
        return out
