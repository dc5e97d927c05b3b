"""An offline, deterministic grounding judge (beyond the paper, docs/method.md §4) so that everything runs without a
server. It looks only at the question, the tool responses and the answer — never at the calls —
so, like a real judge, it rates the answer's quality whether or not the calls were right.

The rule (documented with examples in docs/rewards.md):

- **Facts** of the tool responses: numbers; short string values of JSON fields (≤ 60 chars);
  from long strings and non-JSON text, id-like tokens (a letter, then letters/digits/``-_`` with a
  digit: ``ORD-5521``) and capitalised words.
- **Coverage** ``c = min(1, used / min(3, #facts))``: stating three facts (or all, if fewer) is full
  coverage. A number counts when the answer states it (rounded to the answer's decimals; ``25%``
  also stands for 0.25); a string when it appears in the answer, word-bounded and case-insensitively,
  or when at least two thirds of its words (≥ 3 letters) do.
- **Inventions**: numbers the answer states that appear nowhere in the tool responses or the question
  (list markers and the lengths of JSON lists excepted); id-like tokens and capitalised words (not
  starting a sentence, not month/weekday names) that appear nowhere in them either.
- **Length**: shorter than 20 characters, longer than 1,500, or ≥ 30 words with under 35% distinct
  words (rambling) is a length issue.
- ``raw = 1 + grounding + clean − penalties`` with ``grounding = 3c`` (2 when the responses hold no
  facts, e.g. no tool was called: nothing to ground in), ``clean = 1`` when nothing is invented,
  penalties ``min(2, #invented numbers) + min(1, 0.5 · #invented names) + 1[length issue]``;
  ``rating = clamp(round_half_up(raw), 1, 5)``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from slca_grpo.rewards.judge_base import Judge, JudgeRequest, JudgeVerdict

_STRICT_NUMBER = re.compile(r"(?<![\w.\-/])(-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)(?!\d)(\s*%)?")
_LOOSE_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_LIST_MARKER = re.compile(r"(?m)^(\s*)\d{1,2}[.)](?=\s)")
_ID_TOKEN = re.compile(r"(?<![\w\-])[A-Za-z][A-Za-z0-9_\-]*\d[A-Za-z0-9_\-]*")
_CAPITALISED = re.compile(r"(?<![\w'’\-])[A-Z][A-Za-z'’\-]*[A-Za-z](?!\w)")
_WORD = re.compile(r"[a-z0-9]+")
_STOP_STRINGS = frozenset(
    "ok true false null none yes no n/a na success error the a an and or of in on at to for is are was "
    "were be it its this that these those with from by as not".split()
)
_EXEMPT_NAMES = frozenset(
    "i i'm i'll i've i'd ok am pm mr mrs ms dr utc gmt "
    "january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday".split()
)
MAX_STRING_FACT = 60


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower().replace("_", " ")).strip()


def _contains(haystack: str, needle: str) -> bool:
    return bool(needle) and re.search(r"(?<!\w)" + re.escape(needle) + r"(?!\w)", haystack) is not None


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


@dataclass
class _Facts:
    strings: set[str]
    numbers: set[float]
    known_numbers: set[float]  # every number in tool responses and question (invention check)
    list_lengths: set[int]
    known_text: str  # normalised tool responses + question (invention check)

    @property
    def count(self) -> int:
        return len(self.strings) + len(self.numbers)


def _text_facts(text: str, facts: _Facts) -> None:
    """Facts of free text: numbers, id-like tokens, capitalised words not starting a sentence."""
    for match in _LOOSE_NUMBER.findall(text):
        facts.numbers.add(float(match))
    tokens = _ID_TOKEN.findall(text)
    tokens += [m.group(0) for m in _CAPITALISED.finditer(text) if not _sentence_initial(text, m.start())]
    for token in tokens:
        normalised = _normalise(token)
        if normalised not in _EXEMPT_NAMES and normalised not in _STOP_STRINGS:
            facts.strings.add(normalised)


def _walk_json(value: Any, facts: _Facts, depth: int = 0) -> None:
    if depth > 50:
        return
    if isinstance(value, dict):
        for item in value.values():
            _walk_json(item, facts, depth + 1)
    elif isinstance(value, list):
        facts.list_lengths.add(len(value))
        for item in value:
            _walk_json(item, facts, depth + 1)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, (int, float)):
        if math.isfinite(value):
            facts.numbers.add(float(value))
            facts.known_numbers.add(float(value))
    elif isinstance(value, str):
        normalised = _normalise(value)
        if len(normalised) > MAX_STRING_FACT:
            _text_facts(value, facts)
        elif len(normalised) >= 2 and normalised not in _STOP_STRINGS:
            facts.strings.add(normalised)


def extract_facts(tool_responses: Iterable[str], question: str) -> _Facts:
    responses = list(tool_responses)
    facts = _Facts(set(), set(), set(), set(), _normalise(" ".join(responses + [question])))
    for response in responses:
        data = _json_or_none(response)
        if isinstance(data, (dict, list)):
            _walk_json(data, facts)
        else:
            _text_facts(response, facts)
    facts.numbers = {n for n in facts.numbers if math.isfinite(n)}
    facts.known_numbers |= facts.numbers
    facts.known_numbers |= {float(m) for m in _LOOSE_NUMBER.findall(" ".join(responses + [question]))}
    return facts


def _answer_numbers(answer: str) -> list[tuple[str, list[float], int]]:
    """(literal, candidate values, decimals) of each number the answer states, list markers excepted."""
    text = _LIST_MARKER.sub(r"\1", answer)
    found = []
    for match in _STRICT_NUMBER.finditer(text):
        literal = match.group(1).replace(",", "")
        try:
            value = float(literal)
        except ValueError:  # pragma: no cover - the pattern only matches numbers
            continue
        decimals = len(literal.split(".")[1]) if "." in literal else 0
        candidates = [value, value / 100] if match.group(2) else [value]
        found.append((match.group(0).strip(), candidates, decimals))
    return found


def _number_stated(fact: float, candidates: list[float], decimals: int) -> bool:
    for value in candidates:
        if abs(fact - value) <= 1e-9 or abs(round(fact, decimals) - value) <= 1e-9:
            return True
    return False


def _string_stated(fact: str, answer: str) -> bool:
    if _contains(answer, fact):
        return True
    words = [w for w in _WORD.findall(fact) if len(w) >= 3]
    if len(words) < 2:
        return False
    present = sum(1 for w in words if _contains(answer, w))
    return present / len(words) >= 2 / 3


def _sentence_initial(answer: str, start: int) -> bool:
    before = answer[:start].rstrip(" \t\"'(*_#>-•")
    return not before or before[-1] in ".!?:;\n"


@dataclass(frozen=True)
class RuleJudgeReport:
    """Why the rule judge gave its rating."""

    facts: int
    used: int
    coverage: float
    invented_numbers: tuple[str, ...]
    invented_names: tuple[str, ...]
    length_issue: str | None
    raw: float
    rating: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class RuleJudge(Judge):
    """Deterministic grounding judge; see the module docstring for the rule."""

    name = "rule"

    def __init__(
        self,
        short_chars: int = 20,
        long_chars: int = 1500,
        target_facts: int = 3,
        min_distinct_ratio: float = 0.35,
    ) -> None:
        super().__init__()
        self.short_chars = short_chars
        self.long_chars = long_chars
        self.target_facts = max(1, target_facts)
        self.min_distinct_ratio = min_distinct_ratio

    def _length_issue(self, answer: str) -> str | None:
        if len(answer) < self.short_chars:
            return "too_short"
        if len(answer) > self.long_chars:
            return "too_long"
        words = _WORD.findall(answer.lower())
        if len(words) >= 30 and len(set(words)) / len(words) < self.min_distinct_ratio:
            return "repetitive"
        return None

    def explain(self, request: JudgeRequest) -> RuleJudgeReport:
        """The full breakdown behind the rating of one request."""
        answer = request.answer.strip()
        normalised_answer = _normalise(answer)
        facts = extract_facts(request.tool_responses, request.question)
        stated = _answer_numbers(answer)

        used = sum(1 for s in facts.strings if _string_stated(s, normalised_answer))
        used += sum(1 for n in facts.numbers if any(_number_stated(n, c, d) for _, c, d in stated))
        coverage = min(1.0, used / min(self.target_facts, facts.count)) if facts.count else 0.0

        exempt_counts = {float(n) for n in facts.list_lengths} | {float(len(request.tool_responses))}
        invented_numbers = tuple(
            literal
            for literal, candidates, decimals in stated
            if not any(_number_stated(k, candidates, decimals) for k in facts.known_numbers)
            and not any(abs(c - e) <= 1e-9 for c in candidates for e in exempt_counts)
        )
        invented_names: list[str] = []
        for match in list(_ID_TOKEN.finditer(answer)) + list(_CAPITALISED.finditer(answer)):
            token = match.group(0)
            if token.lower() in _EXEMPT_NAMES or _contains(facts.known_text, _normalise(token)):
                continue
            if match.re is _CAPITALISED and _sentence_initial(answer, match.start()):
                continue
            if token not in invented_names:
                invented_names.append(token)

        length_issue = self._length_issue(answer)
        grounding = 3.0 * coverage if facts.count else 2.0
        clean = 1.0 if not invented_numbers and not invented_names else 0.0
        penalty = min(2.0, float(len(invented_numbers))) + min(1.0, 0.5 * len(invented_names))
        penalty += 1.0 if length_issue else 0.0
        raw = 1.0 + grounding + clean - penalty
        rating = int(min(5, max(1, math.floor(raw + 0.5))))
        return RuleJudgeReport(
            facts=facts.count,
            used=used,
            coverage=coverage,
            invented_numbers=invented_numbers,
            invented_names=tuple(invented_names),
            length_issue=length_issue,
            raw=raw,
            rating=rating,
        )

    def _rate(self, request: JudgeRequest) -> JudgeVerdict:
        report = self.explain(request)
        return JudgeVerdict.ok(report.rating, raw=json.dumps(report.to_dict(), ensure_ascii=False))
