"""Deterministic generation of synthetic tool-calling tasks with fixtures and reference answers.

Every task draws from its own ``random.Random`` seeded by (seed, split, index), so the same seed
gives the same tasks byte for byte, in any process (string seeds hash with SHA-512, not ``hash()``).
Each task is built inside ``value_split(split)``: its request, gold calls, fixtures and answer draw
names, places and free text only from the split's part of each value pool (``values.ValuePool``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from slca_grpo.data.synthetic import phrasings
from slca_grpo.data.synthetic.catalogue import CHAIN_SPECS, DEFAULT_HELDOUT_TOOLS, SIBLINGS, SPEC_BY_NAME, TOOL_SPECS
from slca_grpo.data.synthetic.spec import Args, CatalogueTool, ChainSpec, Response, fill
from slca_grpo.data.synthetic.values import pick, spoken_list, value_split
from slca_grpo.datatypes import SUBSET_IRRELEVANT, SUBSET_TOOL_CALL, Task, ToolCall

KINDS = ("single", "distractor", "parallel", "two_step", "irrelevant")
SPLITS = ("train", "test")
DEFAULT_KIND_WEIGHTS: dict[str, float] = {
    "single": 0.25,
    "distractor": 0.2,
    "parallel": 0.2,
    "two_step": 0.2,
    "irrelevant": 0.15,
}
# v2: the test split's slot values come from pools disjoint from the train split's.
GENERATOR_VERSION = "synthetic-v2"
# Tasks are generated into a list (~4 KB and ~0.3 ms each): a split of this many takes ~4 GB and
# minutes; more is refused before anything is allocated.
MAX_SYNTHETIC_TASKS = 1_000_000
T = TypeVar("T")


def parse_kind_weights(text: str) -> dict[str, float]:
    """``"single=1,two_step=2"`` → ``{"single": 1.0, "two_step": 2.0}`` (ValueError naming the bad item)."""
    weights: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        kind, sep, value = item.partition("=")
        kind = kind.strip()
        if not sep:
            raise ValueError(f"expected KIND=WEIGHT, got {item!r}")
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; kinds: {', '.join(KINDS)}")
        try:
            weights[kind] = float(value)
        except ValueError:
            raise ValueError(f"weight of {kind!r} is not a number: {value!r}") from None
    return weights


@dataclass(frozen=True)
class SuiteConfig:
    """What mix of tasks to generate.

    ``tools_per_task`` bounds how many tools a task offers (the needed ones plus distractors; a task
    needing more offers more). ``heldout_tools`` never appear in the train split; in the test split
    a task builds on one of them with probability ``heldout_share`` (when the kind allows it).
    """

    kind_weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_KIND_WEIGHTS))
    tools_per_task: tuple[int, int] = (3, 5)
    heldout_tools: tuple[str, ...] = DEFAULT_HELDOUT_TOOLS
    heldout_share: float = 0.35
    system_prompt_rate: float = 0.3
    max_parallel_calls: int = 3

    def __post_init__(self) -> None:
        unknown = sorted(set(self.kind_weights) - set(KINDS))
        if unknown:
            raise ValueError(f"unknown task kind(s) {unknown}; kinds are {list(KINDS)}")
        weights = list(self.kind_weights.values())
        if any(not isinstance(w, (int, float)) or w < 0 for w in weights) or sum(weights) <= 0:
            raise ValueError(
                f"kind_weights must be non-negative numbers with a positive sum, got {dict(self.kind_weights)}"
            )
        low, high = self.tools_per_task
        if not (1 <= low <= high):
            raise ValueError(f"tools_per_task must satisfy 1 <= low <= high, got {self.tools_per_task}")
        missing = [name for name in self.heldout_tools if name not in SPEC_BY_NAME]
        if missing:
            raise ValueError(f"heldout_tools names unknown tool(s) {missing}")
        if len(set(self.heldout_tools)) >= len(TOOL_SPECS) - 8:
            raise ValueError("heldout_tools leaves too few tools for the train split (need at least 8)")
        if not 0.0 <= self.heldout_share <= 1.0 or not 0.0 <= self.system_prompt_rate <= 1.0:
            raise ValueError("heldout_share and system_prompt_rate must lie in [0, 1]")
        if not 2 <= self.max_parallel_calls <= 3:
            raise ValueError(f"max_parallel_calls must be 2 or 3, got {self.max_parallel_calls}")


@dataclass
class SyntheticSuite:
    """A train and a test split generated together (held-out phrasings, tools and values in test)."""

    train: list[Task]
    test: list[Task]
    seed: int
    config: SuiteConfig

    @property
    def heldout_tools(self) -> tuple[str, ...]:
        return self.config.heldout_tools


class _Context:
    """Per-split state: which tools may appear and how phrasings are chosen."""

    def __init__(self, split: str, config: SuiteConfig) -> None:
        self.split = split
        self.config = config
        self.heldout = set(config.heldout_tools)
        # Catalogue order (not set order) keeps generation reproducible across processes.
        self.pool = [s.name for s in TOOL_SPECS if split == "test" or s.name not in self.heldout]
        self.pool_set = set(self.pool)

    def choose(self, rng: random.Random, items: Sequence[T], is_heldout: Callable[[T], bool]) -> T:
        """One of ``items``; in the test split a held-out one with probability ``heldout_share``."""
        held = [item for item in items if is_heldout(item)]
        seen = [item for item in items if not is_heldout(item)]
        if self.split == "test" and held and (not seen or rng.random() < self.config.heldout_share):
            return pick(rng, held)
        return pick(rng, seen)

    def choose_tool(self, rng: random.Random, candidates: Sequence[str]) -> str:
        """A gold tool from ``candidates`` that the split may use."""
        return self.choose(rng, [c for c in candidates if c in self.pool_set], lambda name: name in self.heldout)

    def siblings_in_pool(self, name: str) -> list[str]:
        return [s for s in SIBLINGS[name] if s in self.pool_set]


def _template(rng: random.Random, owner: str, templates: Sequence[str], split: str) -> tuple[str, str]:
    index = rng.randrange(len(templates))
    return templates[index], f"{owner}:{split}:{index}"


def _fixture(name: str, arguments: Args, response: Response) -> dict[str, Any]:
    return {"name": name, "arguments": arguments, "response": json.dumps(response, ensure_ascii=False)}


def _offer(
    rng: random.Random, ctx: _Context, needed: Sequence[str], extra: Sequence[str], avoid: set[str]
) -> list[dict[str, Any]]:
    """Tool schemas to offer: the needed ones, ``extra`` (e.g. siblings), then random others, shuffled."""
    low, high = ctx.config.tools_per_task
    count = max(rng.randint(low, high), len(needed) + len(extra) + 1)
    chosen = list(dict.fromkeys([*needed, *extra]))
    others = [n for n in ctx.pool if n not in chosen and n not in avoid]
    chosen += rng.sample(others, min(len(others), count - len(chosen)))
    rng.shuffle(chosen)
    return [SPEC_BY_NAME[name].schema() for name in chosen]


def _not_near(names: Sequence[str]) -> set[str]:
    """Tools a 'plain' distractor must not be: the gold tools' siblings."""
    return {s for name in names for s in SIBLINGS[name]}


def _request(rng: random.Random, spec: CatalogueTool, args: Args, split: str) -> tuple[str, str]:
    template, template_id = _template(rng, spec.name, spec.phrasings(split), split)
    return fill(template, spec.surface(args, rng)), template_id


# --- one builder per kind: each returns (user text, gold steps, fixtures, offered tools, answer, extra meta) ---

_Built = tuple[str, list[list[ToolCall]], list[dict[str, Any]], list[dict[str, Any]], str, dict[str, Any]]


def _single(rng: random.Random, ctx: _Context) -> _Built:
    spec = SPEC_BY_NAME[ctx.choose_tool(rng, ctx.pool)]
    args = spec.sample_args(rng)
    text, template_id = _request(rng, spec, args, ctx.split)
    response = spec.respond(args, rng)
    tools = _offer(rng, ctx, [spec.name], [], avoid=_not_near([spec.name]))
    return (
        text,
        [[ToolCall(spec.name, args)]],
        [_fixture(spec.name, args, response)],
        tools,
        spec.summarize(args, response),
        {"phrasings": [template_id]},
    )


def _distractor(rng: random.Random, ctx: _Context) -> _Built:
    candidates = [n for n in ctx.pool if ctx.siblings_in_pool(n)]
    spec = SPEC_BY_NAME[ctx.choose_tool(rng, candidates)]
    siblings = ctx.siblings_in_pool(spec.name)
    siblings = rng.sample(siblings, min(len(siblings), max(1, ctx.config.tools_per_task[1] - 2)))
    args = spec.sample_args(rng)
    text, template_id = _request(rng, spec, args, ctx.split)
    response = spec.respond(args, rng)
    tools = _offer(rng, ctx, [spec.name], siblings, avoid=set())
    return (
        text,
        [[ToolCall(spec.name, args)]],
        [_fixture(spec.name, args, response)],
        tools,
        spec.summarize(args, response),
        {"phrasings": [template_id], "distractors": sorted(siblings)},
    )


def _parallel_same(rng: random.Random, ctx: _Context, spec: CatalogueTool) -> _Built:
    assert spec.parallel_slot is not None and spec.parallel_values is not None
    slot = spec.parallel_slot
    count = rng.randint(2, ctx.config.max_parallel_calls)
    base = spec.sample_args(rng)
    calls_args = [{**base, slot: value} for value in spec.parallel_values(rng, count, base)]
    templates = [t for t in spec.phrasings(ctx.split) if "{" + slot + "}" in t]
    template, template_id = _template(rng, spec.name, templates, ctx.split)
    slots = spec.surface(base, rng)
    slots[slot] = spoken_list([spec.surface({slot: a[slot]}, rng)[slot] for a in calls_args])
    text = fill(template, slots)
    responses = [spec.respond(a, rng) for a in calls_args]
    tools = _offer(rng, ctx, [spec.name], [], avoid=set())
    answer = " ".join(spec.summarize(a, r) for a, r in zip(calls_args, responses))
    return (
        text,
        [[ToolCall(spec.name, a) for a in calls_args]],
        [_fixture(spec.name, a, r) for a, r in zip(calls_args, responses)],
        tools,
        answer,
        {"phrasings": [template_id], "variant": "same_tool"},
    )


def _parallel_mixed(rng: random.Random, ctx: _Context, first: CatalogueTool) -> _Built:
    count = rng.randint(2, ctx.config.max_parallel_calls)
    names = [first.name]
    others = [n for n in ctx.pool if n != first.name]
    names += rng.sample(others, count - 1)
    specs = [SPEC_BY_NAME[n] for n in names]
    args = [s.sample_args(rng) for s in specs]
    requests = [_request(rng, s, a, ctx.split) for s, a in zip(specs, args)]
    opening_index = rng.randrange(len(phrasings.PARALLEL_OPENINGS[ctx.split]))
    joiner_index = rng.randrange(len(phrasings.PARALLEL_JOINERS[ctx.split]))
    joiner = phrasings.PARALLEL_JOINERS[ctx.split][joiner_index]
    text = phrasings.PARALLEL_OPENINGS[ctx.split][opening_index] + joiner.join(r[0] for r in requests)
    responses = [s.respond(a, rng) for s, a in zip(specs, args)]
    tools = _offer(rng, ctx, names, [], avoid=set())
    answer = " ".join(s.summarize(a, r) for s, a, r in zip(specs, args, responses))
    ids = [r[1] for r in requests] + [
        f"parallel-opening:{ctx.split}:{opening_index}",
        f"parallel-joiner:{ctx.split}:{joiner_index}",
    ]
    return (
        text,
        [[ToolCall(s.name, a) for s, a in zip(specs, args)]],
        [_fixture(s.name, a, r) for s, a, r in zip(specs, args, responses)],
        tools,
        answer,
        {"phrasings": ids, "variant": "mixed_tools"},
    )


def _parallel(rng: random.Random, ctx: _Context) -> _Built:
    spec = SPEC_BY_NAME[ctx.choose_tool(rng, ctx.pool)]
    if spec.parallel_slot is not None and rng.random() < 0.5:
        return _parallel_same(rng, ctx, spec)
    return _parallel_mixed(rng, ctx, spec)


def _chain_candidates(ctx: _Context) -> list[ChainSpec]:
    return [c for c in CHAIN_SPECS if c.first in ctx.pool_set and c.second in ctx.pool_set]


def _two_step(rng: random.Random, ctx: _Context) -> _Built:
    chains = _chain_candidates(ctx)
    chain = ctx.choose(rng, chains, lambda c: c.first in ctx.heldout or c.second in ctx.heldout)
    first, second = SPEC_BY_NAME[chain.first], SPEC_BY_NAME[chain.second]
    first_args = (chain.first_args or first.sample_args)(rng)
    first_response = first.respond(first_args, rng)
    second_args, linked = chain.link(first_args, first_response, rng)
    second_response = second.respond(second_args, rng)
    slots = first.surface(first_args, rng)
    for key, value in second.surface({k: v for k, v in second_args.items() if k not in linked}, rng).items():
        slots.setdefault(key, value)
    template, template_id = _template(rng, chain.name, chain.phrasings(ctx.split), ctx.split)
    tools = _offer(rng, ctx, [first.name, second.name], [], avoid=set())
    answer = f"{first.summarize(first_args, first_response)} {second.summarize(second_args, second_response)}"
    links = [{"from_step": 0, "to_step": 1, "argument": key, "value": second_args[key]} for key in linked]
    return (
        fill(template, slots),
        [[ToolCall(first.name, first_args)], [ToolCall(second.name, second_args)]],
        [_fixture(first.name, first_args, first_response), _fixture(second.name, second_args, second_response)],
        tools,
        answer,
        {"phrasings": [template_id], "chain": chain.name, "links": links},
    )


def _irrelevant(rng: random.Random, ctx: _Context) -> _Built:
    if rng.random() < 0.5:
        # Something a catalogue tool could do, but that tool (and its domain) is not offered.
        spec = SPEC_BY_NAME[ctx.choose_tool(rng, ctx.pool)]
        text, template_id = _request(rng, spec, spec.sample_args(rng), ctx.split)
        capability = spec.capability
        avoid = {s.name for s in TOOL_SPECS if s.domain == spec.domain} | set(SIBLINGS[spec.name])
        extra: dict[str, Any] = {"phrasings": [template_id], "variant": "tool_not_offered", "requested_tool": spec.name}
    else:
        requests = phrasings.OUT_OF_SCOPE[ctx.split]
        index = rng.randrange(len(requests))
        text, capability = requests[index]
        avoid = set()
        extra = {"phrasings": [f"out-of-scope:{ctx.split}:{index}"], "variant": "out_of_scope"}
    low, high = ctx.config.tools_per_task
    candidates = [n for n in ctx.pool if n not in avoid]
    names = rng.sample(candidates, min(len(candidates), rng.randint(low, high)))
    tools = [SPEC_BY_NAME[n].schema() for n in names]
    answer = phrasings.refusal(capability, [SPEC_BY_NAME[n].capability for n in names], rng)
    return text, [], [], tools, answer, extra


_BUILDERS = {
    "single": _single,
    "distractor": _distractor,
    "parallel": _parallel,
    "two_step": _two_step,
    "irrelevant": _irrelevant,
}


def _kind_schedule(n: int, config: SuiteConfig, rng: random.Random) -> list[str]:
    """Exactly proportional kind counts (largest remainder), in shuffled order."""
    weights = {k: float(config.kind_weights.get(k, 0.0)) for k in KINDS}
    total = sum(weights.values())
    quotas = {k: n * w / total for k, w in weights.items()}
    counts = {k: int(q) for k, q in quotas.items()}
    by_remainder = sorted(KINDS, key=lambda k: (-(quotas[k] - counts[k]), KINDS.index(k)))
    for k in by_remainder[: n - sum(counts.values())]:
        counts[k] += 1
    schedule = [k for k in KINDS for _ in range(counts[k])]
    rng.shuffle(schedule)
    return schedule


def generate_tasks(seed: int, n: int, split: str = "train", config: SuiteConfig | None = None) -> list[Task]:
    """``n`` tasks of one split. Same (seed, n, split, config) gives the same tasks."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"the number of tasks must be a non-negative int, got {n!r}")
    if n > MAX_SYNTHETIC_TASKS:
        raise ValueError(
            f"at most {MAX_SYNTHETIC_TASKS:,} synthetic tasks a split (they are held in memory, ~4 KB each), got {n:,}"
        )
    config = config or SuiteConfig()
    ctx = _Context(split, config)
    schedule = _kind_schedule(n, config, random.Random(f"{seed}:{split}:kinds"))
    tasks = []
    for index, kind in enumerate(schedule):
        rng = random.Random(f"{seed}:{split}:{index}")
        with value_split(split):
            text, steps, fixtures, tools, answer, extra = _BUILDERS[kind](rng, ctx)
        messages: list[dict[str, Any]] = []
        if rng.random() < config.system_prompt_rate:
            messages.append({"role": "system", "content": pick(rng, phrasings.SYSTEM_PROMPTS)})
        messages.append({"role": "user", "content": text})
        gold_names = [c.name for step in steps for c in step]
        metadata: dict[str, Any] = {
            "source": GENERATOR_VERSION,
            "kind": kind,
            "split": split,
            **extra,
            "domains": sorted({SPEC_BY_NAME[n].domain for n in gold_names}),
            "heldout_tools": sorted({n for n in gold_names if n in ctx.heldout}),
            "fixtures": fixtures,
        }
        tasks.append(
            Task(
                id=f"synth-s{seed}-{split}-{index:05d}",
                messages=messages,
                tools=tools,
                gold_calls=steps,
                subset=SUBSET_IRRELEVANT if kind == "irrelevant" else SUBSET_TOOL_CALL,
                reference_answer=answer,
                metadata=metadata,
            )
        )
    return tasks


def generate_suite(
    seed: int = 0, n_train: int = 1000, n_test: int = 200, *, config: SuiteConfig | None = None, **options: Any
) -> SyntheticSuite:
    """Train and test tasks. ``options`` are :class:`SuiteConfig` fields (e.g. ``kind_weights``)."""
    if config is not None and options:
        raise ValueError("pass either config or individual options, not both")
    config = config or SuiteConfig(**options)
    return SyntheticSuite(
        train=generate_tasks(seed, n_train, "train", config),
        test=generate_tasks(seed, n_test, "test", config),
        seed=seed,
        config=config,
    )
