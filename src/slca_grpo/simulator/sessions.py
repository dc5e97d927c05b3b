"""Per-episode state, so later calls see what earlier calls created, changed or removed.

Every successful response is scanned for records (JSON objects with an id-like field); each is
stored under (entity, id) and merged with what was known. Verbs then act on the record the call
names: a cancel sets its status to cancelled, an update writes the new values, a delete removes it
(later lookups answer ``not_found``); a status a write set (cancelled, or what the tool's description
says) is remembered, so a later write that needs another status (``cancel_pending_order`` on an order
this session already cancelled) answers ``conflict``. The history of calls and answers is folded into a running
digest that goes into the cache key, so replay is exact for the same sequence of calls.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slca_grpo.simulator import intent as I
from slca_grpo.simulator.infer import META_KEYS
from slca_grpo.simulator.words import canonical_json, digest, singular, split_words

WRITE_VERBS = (I.UPDATE, I.CANCEL, I.DELETE)

EntityKey = tuple[str, str]
_GENERIC_CONTAINERS = frozenset("results result data records entries matches hits response items_found".split())
_MAX_DEPTH = 5
HISTORY_LENGTH = 32
# Bounds on one session's memory: past either, the oldest records are forgotten (a lookup of one
# then reads like a record the session never saw).
MAX_SESSION_RECORDS = 5_000
MAX_SESSION_BYTES = 8 * 1024 * 1024


@dataclass
class Target:
    """The record a call names by id: where it is stored, which argument named it, what is known."""

    key: EntityKey
    id_key: str
    id_value: Any
    data: dict[str, Any] | None


@dataclass
class Resolution:
    target: Target | None = None
    related: dict[str, dict[str, Any]] = field(default_factory=dict)  # other known records, by arg
    deleted: Target | None = None  # the call names a record this session deleted
    conflict: str | None = None  # why the record's status, set earlier in this session, forbids the call


class SessionState:
    """What one episode has seen so far."""

    def __init__(self, session_id: str, now: float) -> None:
        self.session_id = session_id
        self.digest = ""
        self.calls = 0
        self.entities: dict[EntityKey, dict[str, Any]] = {}  # oldest first
        self.by_value: dict[str, set[EntityKey]] = {}
        self.deleted: dict[EntityKey, None] = {}  # an ordered set, oldest first
        self.statuses: dict[EntityKey, str] = {}  # statuses that writes of this session moved records to
        self.approx_bytes = 0  # of the answers folded in since the last trim: an upper bound
        self.history: deque[tuple[dict[str, Any], str]] = deque(maxlen=HISTORY_LENGTH)
        self.last_used = now

    def next_call_index(self) -> int:
        index = self.calls
        self.calls += 1
        return index

    # -- lookups -----------------------------------------------------------------------------

    def resolve(self, intent: I.Intent, args: dict[str, Any], tool_name: str = "") -> Resolution:
        """Find the records this call's id arguments refer to."""
        id_args = [(k, v) for k, v in args.items() if I.is_id_key(k) and _scalar(v)]
        resolution = Resolution()
        if not id_args:
            return resolution
        primary = None
        if intent.verb != I.CREATE:
            primary = next(
                (kv for kv in id_args if kv[0] == "id" or I.id_stem(kv[0], intent.entity) == intent.entity),
                None,
            )
            if primary is None and len(id_args) == 1:
                primary = id_args[0]
            if primary is None:
                # update_reservation_flights(reservation_id, payment_id) acts on the record its name names.
                named = set(split_words(tool_name))
                primary = next((kv for kv in id_args if I.id_stem(kv[0], intent.entity) in named), None)
        for name, value in id_args:
            key = self._find(I.id_stem(name, intent.entity), value)
            is_primary = primary is not None and name == primary[0]
            if key in self.deleted:
                if is_primary:
                    resolution.deleted = Target(key, name, value, None)
                continue
            data = self.entities.get(key)
            if is_primary:
                resolution.target = Target(key, name, value, data)
                resolution.conflict = self._conflict(intent, key, value)
            elif data is not None:
                resolution.related[name] = data
        return resolution

    def _conflict(self, intent: I.Intent, key: EntityKey, value: Any) -> str | None:
        """A write whose name needs a status (cancel_pending_order) on a record this session moved to another."""
        current = self.statuses.get(key)
        if current is None or not intent.status_before or intent.verb not in WRITE_VERBS:
            return None
        if _status_word(current) == _status_word(intent.status_before):
            return None
        label = key[0].replace("_", " ").capitalize()
        return f"{label} {value} is {current}, not {intent.status_before}: it cannot be changed by this call."

    def _find(self, stem: str, value: Any) -> EntityKey:
        key = (stem, str(value))
        if key in self.entities or key in self.deleted:
            return key
        # Ids are unique in practice: a value known under exactly one entity is that entity.
        candidates = self.by_value.get(str(value), set())
        if len(candidates) == 1:
            return next(iter(candidates))
        return key

    # -- updates -----------------------------------------------------------------------------

    def record(self, call: dict[str, Any], intent: I.Intent, text: str, data: Any, target: Target | None) -> None:
        """Fold a successful answer into the state (entities, verb effects, history, digest)."""
        if data is not None:
            self._index(data, intent.entity, None, 0)
        if target is not None:
            self._apply_verb(intent, call.get("arguments") or {}, target)
        self.history.append((call, text))
        self.digest = digest(self.digest, canonical_json(call), text)
        self.approx_bytes += len(text)
        if len(self.entities) > MAX_SESSION_RECORDS or self.approx_bytes > MAX_SESSION_BYTES:
            self._trim()

    def _trim(self) -> None:
        """Forget the oldest records until the session holds at most 3/4 of both bounds."""
        sizes = {key: len(json.dumps(fields, default=str)) for key, fields in self.entities.items()}
        total = sum(sizes.values())
        for key in list(self.entities):
            if len(self.entities) <= MAX_SESSION_RECORDS * 3 // 4 and total <= MAX_SESSION_BYTES * 3 // 4:
                break
            del self.entities[key]
            self.statuses.pop(key, None)
            total -= sizes[key]
            keys = self.by_value.get(key[1])
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self.by_value[key[1]]
        while len(self.deleted) > MAX_SESSION_RECORDS:
            del self.deleted[next(iter(self.deleted))]
        self.approx_bytes = total

    def _index(self, node: Any, entity: str, parent_key: str | None, depth: int) -> None:
        if depth > _MAX_DEPTH:
            return
        if isinstance(node, list):
            for item in node:
                self._index(item, entity, parent_key, depth + 1)
            return
        if not isinstance(node, dict):
            return
        default = entity
        if parent_key is not None and depth > 2 and parent_key not in _GENERIC_CONTAINERS:
            words = split_words(parent_key)
            default = singular(words[-1]) if words else entity
        pk = _primary_key(node, default)
        if pk is not None:
            key = (I.id_stem(pk, default), str(node[pk]))
            fields = {k: v for k, v in node.items() if k not in META_KEYS}
            stored = self.entities.get(key)
            if stored is None:
                self.entities[key] = fields
            else:
                stored.update(fields)
            self.deleted.pop(key, None)
            self.by_value.setdefault(key[1], set()).add(key)
        for child_key, child in node.items():
            if isinstance(child, (dict, list)):
                self._index(child, entity, child_key, depth + 1)

    def _apply_verb(self, intent: I.Intent, args: dict[str, Any], target: Target) -> None:
        key = target.key
        if intent.verb == I.DELETE:
            self.entities.pop(key, None)
            self.statuses.pop(key, None)
            self.deleted[key] = None
            keys = self.by_value.get(key[1])
            if keys is not None:
                keys.discard(key)
            return
        if intent.verb not in (I.CANCEL, I.UPDATE):
            return
        stored = self.entities.get(key)
        if stored is None:
            stored = self.entities[key] = {target.id_key: target.id_value}
            self.by_value.setdefault(key[1], set()).add(key)
        if intent.verb == I.UPDATE:
            for name, value in args.items():
                if I.is_id_key(name):
                    continue
                if name.startswith("new_") and name[4:] in stored:
                    name = name[4:]
                stored[name] = value
        status = status_after_write(intent)
        if status:
            status_key = next((k for k in stored if k == "status" or k.endswith("_status")), "status")
            current = stored.get(status_key)
            stored[status_key] = status.upper() if isinstance(current, str) and current.isupper() else status
            if status != intent.status_before:
                # A status the write moved the record to. The one a name only assumes (the
                # "pending" of modify_pending_order) is not known to hold: the real call may have
                # failed, so no later call conflicts with it.
                self.statuses[key] = stored[status_key]


def status_after_write(intent: I.Intent) -> str:
    """The status a write leaves its record in: what the description says, else cancelled for a
    cancel, else the status the name says the record is in (modify_pending_order keeps it pending)."""
    if intent.verb not in WRITE_VERBS or intent.verb == I.DELETE:
        return ""
    if intent.status_after:
        return intent.status_after
    return "cancelled" if intent.verb == I.CANCEL else intent.status_before


def _status_word(value: Any) -> str:
    return " ".join(split_words(str(value)))


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool) and str(value) != ""


def _primary_key(node: dict[str, Any], default: str) -> str | None:
    ids = [k for k, v in node.items() if I.is_id_key(k) and _scalar(v)]
    if not ids:
        return None
    for k in ids:
        if k != "id" and I.id_stem(k, default) == default:
            return k
    return "id" if "id" in ids else ids[0]


class SessionStore:
    """Sessions by id with a time-to-live (since last use) and an LRU bound on their number."""

    def __init__(self, ttl_s: float, max_sessions: int, clock: Callable[[], float] = time.monotonic) -> None:
        # `not ttl_s > 0` also refuses NaN, which breaks every comparison below: the sweep's
        # `<= ttl_s` would drop every session on each call, while peek's `> ttl_s` never expires one.
        if not ttl_s > 0:
            raise ValueError(f"ttl_s must be > 0, got {ttl_s}")
        if not max_sessions >= 1:
            raise ValueError(f"max_sessions must be >= 1, got {max_sessions!r}")
        self.ttl_s = ttl_s
        self.max_sessions = max_sessions
        self._clock = clock
        self._sessions: OrderedDict[str, SessionState] = OrderedDict()
        self.lock = threading.RLock()
        self.expired = 0
        self.evicted = 0

    def get(self, session_id: str) -> SessionState:
        """The live session (created when absent or expired), marked as just used."""
        with self.lock:
            now = self._clock()
            self._sweep(now)
            state = self._sessions.get(session_id)
            if state is None:
                state = SessionState(session_id, now)
                self._sessions[session_id] = state
                while len(self._sessions) > self.max_sessions:
                    self._sessions.popitem(last=False)
                    self.evicted += 1
            else:
                self._sessions.move_to_end(session_id)
            state.last_used = now
            return state

    def peek(self, session_id: str) -> SessionState | None:
        with self.lock:
            state = self._sessions.get(session_id)
            if state is not None and self._clock() - state.last_used > self.ttl_s:
                return None
            return state

    def reset(self, session_id: str) -> bool:
        with self.lock:
            return self._sessions.pop(session_id, None) is not None

    def _sweep(self, now: float) -> None:
        # Least recently used first, so expired sessions sit at the front.
        while self._sessions:
            oldest = next(iter(self._sessions.values()))
            if now - oldest.last_used <= self.ttl_s:
                break
            self._sessions.popitem(last=False)
            self.expired += 1

    def __len__(self) -> int:
        with self.lock:
            return len(self._sessions)

    def __contains__(self, session_id: object) -> bool:
        with self.lock:
            return session_id in self._sessions
