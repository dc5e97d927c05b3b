"""Call matching shared by HierR, ToolPO and RLTR, on the loose value equality of
:mod:`slca_grpo.value_match` (pure, never raises)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from slca_grpo.datatypes import ToolCall
from slca_grpo.value_match import loose_equal


def key_jaccard(gold: dict[str, Any], predicted: dict[str, Any]) -> float:
    """Jaccard similarity of two argument key sets (1 when both are empty)."""
    gold_keys, predicted_keys = set(gold), set(predicted)
    union = gold_keys | predicted_keys
    return len(gold_keys & predicted_keys) / len(union) if union else 1.0


def value_match_fraction(gold: dict[str, Any], predicted: dict[str, Any]) -> float:
    """Fraction of the gold keys whose predicted value loosely matches (1 when gold has no keys)."""
    if not gold:
        return 1.0
    hits = sum(1 for k, v in gold.items() if k in predicted and loose_equal(v, predicted[k]))
    return hits / len(gold)


def strict_call_match(gold: ToolCall, predicted: ToolCall) -> bool:
    """ToolPO's strict match: exact name, every gold key present, values loosely equal (extra keys allowed)."""
    return gold.name == predicted.name and all(
        k in predicted.arguments and loose_equal(v, predicted.arguments[k]) for k, v in gold.arguments.items()
    )


def max_bipartite_matching(
    gold: Sequence[ToolCall], predicted: Sequence[ToolCall], matches: Callable[[ToolCall, ToolCall], bool]
) -> list[int | None]:
    """Maximum one-to-one matching (Kuhn's augmenting paths): for each gold call the index of its
    predicted partner, or None. Sizes are a handful of calls, so O(V·E) is fine."""
    edges = [[j for j, p in enumerate(predicted) if matches(g, p)] for g in gold]
    owner: list[int | None] = [None] * len(predicted)

    def augment(i: int, seen: set[int]) -> bool:
        for j in edges[i]:
            if j in seen:
                continue
            seen.add(j)
            current = owner[j]
            if current is None or augment(current, seen):
                owner[j] = i
                return True
        return False

    for i in range(len(gold)):
        augment(i, set())
    partner: list[int | None] = [None] * len(gold)
    for j, gold_index in enumerate(owner):
        if gold_index is not None:
            partner[gold_index] = j
    return partner
