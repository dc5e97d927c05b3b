"""What the LLM judge and the LLM completeness checker share: one chat-completions client
(``slca_grpo.endpoints``), one sampling temperature, and batches run concurrently up to
``concurrency`` requests (the client's bound).

Retried: transport errors, timeouts, HTTP 5xx and 429 (honouring ``Retry-After``, capped). Not
retried: other 4xx and replies that are not a chat completion (a deterministic server problem;
retrying would only add load).
"""

from __future__ import annotations

from dataclasses import replace

from slca_grpo.endpoints import SHORT_REPLY_BYTES, ChatClient, EndpointConfig


class EndpointBacked:
    endpoint: ChatClient
    temperature: float

    def _init_endpoint(self, config: EndpointConfig, temperature: float) -> None:
        # A verdict is a few words: a longer reply is refused whatever the endpoint's settings allow.
        short = replace(config, max_reply_bytes=min(config.max_reply_bytes, SHORT_REPLY_BYTES))
        self.endpoint = ChatClient(short)
        self.temperature = temperature

    @property
    def concurrency(self) -> int:
        return self.endpoint.concurrency

    def close(self) -> None:
        self.endpoint.close()
