"""The offline backend: deterministic, schema-valid fabricated answers (no model, no network)."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from datetime import timedelta
from typing import Any

from slca_grpo.datatypes import ObservationError
from slca_grpo.simulator import errors as E
from slca_grpo.simulator import intent as I
from slca_grpo.simulator.base import Backend, BackendRequest, BackendResult
from slca_grpo.simulator.checks import validate_value
from slca_grpo.simulator.fabricate import SchemaFaker
from slca_grpo.simulator.field_values import BASE_DATE, ValueContext
from slca_grpo.simulator.idshapes import argument_examples, described_examples
from slca_grpo.simulator.infer import infer_response
from slca_grpo.simulator.safety import SchemaRefused
from slca_grpo.simulator.sessions import Target, status_after_write
from slca_grpo.simulator.words import DetRng, canonical_json, snake, split_words

# Bump when the fabricator's output changes, so old cache entries are not replayed.
FABRICATOR_VERSION = "schema-v2"
_ATTEMPTS = 3


class SchemaBackend(Backend):
    """Same seed + same call + same session state → the same answer, byte for byte."""

    name = "schema"
    bounds_itself = True  # its loops check the deadline (slca_grpo.simulator.budget)

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.today = BASE_DATE + timedelta(days=DetRng(seed, "today").randint(0, 180))
        self.invalid_answers = 0  # answers that still failed `returns` after every attempt
        self._lock = threading.Lock()

    def cache_identity(self) -> dict[str, Any]:
        return {"backend": self.name, "prompt_version": FABRICATOR_VERSION}

    def generate(self, request: BackendRequest) -> BackendResult:
        spec = request.spec
        args = request.call.arguments
        target = request.target
        intent = acting_intent(spec.name, spec.intent, target)
        base = (self.seed, spec.digest, canonical_json(args), request.state_digest)
        earlier = [call for call, _ in request.history]
        examples = {**described_examples(spec.parameters), **argument_examples([*earlier, {"arguments": args}])}
        ctx = ValueContext(DetRng(*base), args, intent, self.today, id_examples=examples)
        primary = (target.id_key, target.id_value) if target is not None else None
        stored = target.data if target is not None else None
        if spec.returns is None:
            data = infer_response(intent, args, ctx, primary, stored)
            _set_status(data, status_after_write(intent))
        else:
            context = _context_values(intent, args, primary, stored)
            # Lists and objects are checked only shallowly when echoed (a flights argument whose
            # items lack the answer's required fields): the second attempt keeps only the scalars,
            # so ids, statuses and plain values are still echoed; the last echoes nothing.
            scalars = {k: v for k, v in context.items() if not isinstance(v, (list, dict))}
            for attempt in range(_ATTEMPTS):
                if attempt:
                    ctx = ValueContext(DetRng(*base, attempt), args, intent, self.today, id_examples=examples)
                faker = SchemaFaker(spec.returns, ctx, scalars if attempt else context, echo=attempt < _ATTEMPTS - 1)
                try:
                    data = faker.generate()
                except SchemaRefused as exc:  # the answer outgrew the size limit: an error, as a value
                    message = f"Tool {spec.name!r} is refused: {exc}"
                    return BackendResult(error=ObservationError(E.INVALID_SCHEMA, message))
                if validate_value(spec.returns_validator, data) is None:
                    break
            else:
                with self._lock:
                    self.invalid_answers += 1
        return BackendResult(text=json.dumps(data, ensure_ascii=False), data=data)

    def stats(self) -> dict[str, float]:
        return {"invalid_answers": self.invalid_answers}


def acting_intent(name: str, intent: I.Intent, target: Target | None) -> I.Intent:
    """The intent a write acts with: on the record its id argument names, when the tool's name names
    that record too. ``update_reservation_flights(reservation_id=…)`` answers with the reservation,
    not with a flight."""
    if target is None or intent.verb not in (I.UPDATE, I.CANCEL, I.DELETE):
        return intent
    stem = target.key[0]
    if stem == intent.entity or stem not in split_words(name):
        return intent
    return replace(intent, entity=stem, template=I.template_of(stem) or "generic")


def _set_status(data: Any, status: str) -> None:
    if not status or not isinstance(data, dict):
        return
    key = next((k for k in data if k == "status" or k.endswith("_status")), "status")
    current = data.get(key)
    data[key] = status.upper() if isinstance(current, str) and current.isupper() else status


def _context_values(
    intent: I.Intent, args: dict[str, Any], primary: tuple[str, Any] | None, stored: dict[str, Any] | None
) -> dict[str, Any]:
    """Field values the answer should carry, lowest priority first: arguments, record, verb."""
    context: dict[str, Any] = dict(args)
    if primary is not None and intent.verb != I.CREATE:
        context.setdefault("id", primary[1])
        context.setdefault(f"{snake(intent.entity)}_id", primary[1])
    if stored:
        context.update(stored)
    if intent.verb == I.UPDATE:
        for key, value in args.items():
            context[key.removeprefix("new_")] = value
    if status_after_write(intent):
        context["status"] = status_after_write(intent)
    if intent.verb == I.DELETE:
        context.update({"deleted": True, "success": True})
    return context
