"""A simulator backend that answers every call by echoing it, chosen by name.

    slca --plugin examples/plugins/echo_backend.py simulate --backend echo \
        --tools tools.json --call '{"name": "get_weather", "arguments": {"city": "Oslo"}}'

or ``simulator: {backend: echo, backend_options: {note: ...}}`` in a training config.
"""

import json

from slca_grpo.simulator import Backend, BackendResult
from slca_grpo.simulator.core import register_backend


class EchoBackend(Backend):
    name = "echo"

    def __init__(self, note: str = "") -> None:
        self.note = note

    def cache_identity(self):
        return {"backend": self.name, "note": self.note}  # what, beside the call, decides the answer

    def generate(self, request):
        data = {"tool": request.call.name, "arguments": request.call.arguments, "note": self.note}
        return BackendResult(text=json.dumps(data), data=data)


@register_backend("echo")
def make_echo(config):
    return EchoBackend(**config.backend_options)
