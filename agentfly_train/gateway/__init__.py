"""A token-exact OpenAI-compatible gateway: agent programs call the policy as an OpenAI model, and what
they sample is recorded for training exactly as it was sampled.

Each episode gets a base URL of its own (``http://HOST:PORT/episodes/{key}/v1``; the key is also
accepted as the API key on ``/v1``). Its chat completions are rendered with the model's chat template,
answered by the trainer's generator (batched with every other episode's calls), and recorded as token
rows: a call that continues a row's tokens exactly extends it, any other starts a new row; only the
sampled tokens get mask 1, with their log-probs.

The same core answers OpenAI's Responses API (:mod:`.responses`) and Anthropic's Messages API
(:mod:`.messages`), each a converter onto the chat request.

Modules, one concept each: :mod:`.protocol` (OpenAI's wire format), :mod:`.rendering` (messages to
prompt tokens), :mod:`.tool_calls` (model text to ``tool_calls`` and back), :mod:`.recording` (rows and
counters), :mod:`.server` (the HTTP server and the episode API).

Example:
    >>> gateway = Gateway(generator, tokenizer, GatewaySettings(max_model_len=2048))  # doctest: +SKIP
    >>> with BackgroundGateway(gateway) as running:  # doctest: +SKIP
    ...     episode = running.open_episode()
    ...     answer = my_agent(base_url=episode.base_url, api_key=episode.key)
    ...     rows = running.close_episode(episode.key).rows
"""

from agentfly_train.gateway.recording import EpisodeCounters, EpisodeRecording, Row
from agentfly_train.gateway.server import BackgroundGateway, EpisodeEndpoint, Gateway, GatewaySettings

__all__ = [
    "BackgroundGateway",
    "EpisodeCounters",
    "EpisodeEndpoint",
    "EpisodeRecording",
    "Gateway",
    "GatewaySettings",
    "Row",
]
