"""What a reader build is measured by: teacher-forced probes, greedy drills and task rollouts.

A build's loss says little about whether the model reads its prompt, so every ``probe_every`` steps
:mod:`recipes.reader.pretrain` measures (docs/models.md):

- on fixed documents, teacher-forced: accuracy on the assistant's tokens, on *copied* tokens
  (values in the request that the schema does not hold), on called tools' names, and on the one
  token of each called name that tells the offered names apart (the *choice*: ``stock`` in
  ``get_stock_price`` beside ``get_recipe``; the name's other tokens are copies once it is made);
- greedy drills (repeat, recall, fill JSON, convert) on values never seen;
- greedy rollouts of synthetic test-split tasks, scored as ``slca eval indomain`` scores them.
"""

from __future__ import annotations

import bisect
import os
import random
import re
from typing import Any

import torch

from recipes.reader.corpus import DRILLS
from slca_grpo.chat import parse_tool_calls
from slca_grpo.chat.chat_format import build_formatter
from slca_grpo.chat.template import render_chat
from slca_grpo.data.synthetic import generate_suite
from slca_grpo.engine import SamplingConfig, sample
from slca_grpo.eval.indomain import score_trajectories
from slca_grpo.rewards.factory import make_judge
from slca_grpo.rollout.environment import ToolEnvironment
from slca_grpo.rollout.loop import AgentLoop, RolloutConfig
from slca_grpo.simulator import SimulatorConfig, build_simulator


def encode(tokenizer: Any, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """Token ids and character offsets of ``text`` (whole: a longer one is cut where it is used)."""
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    return encoded["input_ids"], encoded["offset_mapping"]


def copy_positions(ids: list[int], offsets: list[tuple[int, int]], text: str) -> tuple[list[int], list[int]]:
    """The positions of assistant tokens in ``text`` (its ``ids`` and their character ``offsets``),
    and of those a model must copy.

    A copied token is an assistant token that occurs in the turns before it but not in the system
    prompt (so not schema boilerplate): the fresh values of the corpus.
    """
    system_end = text.find("<|im_end|>")
    system_ids = set(ids[: next((i for i, (s, _) in enumerate(offsets) if s >= system_end), len(ids))])
    starts = [begin for begin, _ in offsets]
    spans = []  # (first character, end character, ids before the turn) of each assistant turn
    start = text.find("<|im_start|>assistant\n")
    while start >= 0:
        body = start + len("<|im_start|>assistant\n")
        end = text.find("<|im_end|>", body)
        spans.append((body, end if end >= 0 else len(text), set(ids[: bisect.bisect_left(starts, body)])))
        start = text.find("<|im_start|>assistant\n", body)
    assistant, copied = [], []
    for position, begin in enumerate(starts):
        span = next((s for s in spans if s[0] <= begin < s[1]), None)
        if span is None:
            continue
        assistant.append(position)
        if ids[position] in span[2] and ids[position] not in system_ids:
            copied.append(position)
    return assistant, copied


# Greedy drills of each kind that `drill_accuracy` measures (at every task evaluation of a build).
DRILLS_PER_KIND = 50

# A call as rendered: its name, then its arguments (an argument called "name" is not a tool's name).
_CALL_NAME = re.compile(r'\{"name": "([^"]*)", "arguments"')


# An offered tool as the system prompt lists it, one JSON object a line (OpenAI format or bare).
_OFFERED_NAME = re.compile(r'^\{(?:"type": "function", "function": \{)?"name": "([^"]*)"', flags=re.M)


def called_name_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the tool names called in the assistant's turns, in order."""
    spans = []
    start = text.find("<|im_start|>assistant\n")
    while start >= 0:
        end = text.find("<|im_end|>", start)
        end = end if end >= 0 else len(text)
        for block in re.finditer(r"<tool_call>(.*?)</tool_call>", text[start:end], flags=re.S):
            base = start + block.start(1)
            spans += [(base + m.start(1), base + m.end(1)) for m in _CALL_NAME.finditer(block.group(1))]
        start = text.find("<|im_start|>assistant\n", end)
    return spans


def offered_names(text: str) -> list[str]:
    """The tool names the conversation's system prompt offers."""
    end = text.find("<|im_end|>")
    return _OFFERED_NAME.findall(text[: end if end >= 0 else len(text)])


def called_name_tokens(offsets: list[tuple[int, int]], text: str) -> list[tuple[list[int], int | None]]:
    """For each tool name called in the assistant's turns: the positions of the tokens that spell
    it, and the token that tells it from every other offered name (None if no token does).

    The choosing token holds the name's first character past the longest prefix it shares with one
    of them (``stock`` of ``get_stock_price`` beside ``get_recipe``; the closing quote when the name
    is another's prefix). The tokens before it may be right by habit (``get_``), those after it are
    copies."""
    starts = [begin for begin, _ in offsets]
    offered = offered_names(text)
    names = []
    for lo, hi in called_name_spans(text):
        name = text[lo:hi]
        shared = max((len(os.path.commonprefix([name, other])) for other in offered if other != name), default=0)
        position = bisect.bisect_right(starts, lo + shared) - 1
        choice = position if position >= 0 and offsets[position][1] > lo + shared else None
        names.append((list(range(bisect.bisect_left(starts, lo), bisect.bisect_left(starts, hi))), choice))
    return names


@torch.no_grad()
def probe(
    model: torch.nn.Module, tokenizer: Any, texts: list[str], seq_len: int, prefix: str = "probe"
) -> dict[str, float]:
    """Loss and teacher-forced accuracy on fixed documents: on assistant tokens, on copied values,
    on called tools' names and on the token of each name that chooses among the offered tools
    (:func:`called_name_tokens`), as ``{prefix}/loss`` and ``{prefix}/{kind}_acc``."""
    was_training = model.training
    model.eval()
    totals = {"loss": 0.0, "tokens": 0}
    kinds = ("assistant", "copy", "name", "choice")
    totals.update({f"{key}{end}": 0 for key in kinds for end in ("", "_right")})
    for text in texts:
        ids, offsets = encode(tokenizer, text)
        assistant, copied = copy_positions(ids, offsets, text)
        names = called_name_tokens(offsets, text)
        named = [p for spelled, _ in names for p in spelled]
        chosen = [choice for _, choice in names if choice is not None]
        ids = ids[:seq_len]
        inputs = torch.tensor([ids], device=model.device)
        logits = model(input_ids=inputs).logits[0, :-1].float()
        targets = inputs[0, 1:]
        totals["loss"] += torch.nn.functional.cross_entropy(logits, targets, reduction="sum").item()
        totals["tokens"] += len(targets)
        predicted = logits.argmax(-1)
        for key, positions in zip(kinds, (assistant, copied, named, chosen)):
            kept = [p - 1 for p in positions if 0 < p < len(ids)]
            totals[key] += len(kept)
            kept = torch.tensor(kept, dtype=torch.long, device=predicted.device)
            totals[f"{key}_right"] += int((predicted[kept] == targets[kept]).sum())
    model.train(was_training)
    return {
        f"{prefix}/loss": totals["loss"] / max(1, totals["tokens"]),
        **{f"{prefix}/{key}_acc": totals[f"{key}_right"] / max(1, totals[key]) for key in kinds},
    }


@torch.no_grad()
def task_evaluation(model: torch.nn.Module, tokenizer: Any, count: int, seed: int = 7) -> dict[str, float]:
    """The model as a tool-calling agent before any SFT: greedy rollouts of ``count`` synthetic
    test-split tasks (another seed than ``slca eval``'s 200) in the schema simulator, scored as
    ``slca eval indomain`` scores them, and the share of calls naming a tool not offered."""
    tasks = generate_suite(seed=seed, n_train=0, n_test=count).test
    loop = AgentLoop(
        model,
        build_formatter(tokenizer, chat_format="hermes"),
        ToolEnvironment(build_simulator(SimulatorConfig(backend="schema"))),
        RolloutConfig(group_size=1),
    )
    was_training = model.training
    model.eval()
    trajectories = loop.run(
        tasks, group_size=1, sampling=SamplingConfig(temperature=0.0), generator=torch.Generator().manual_seed(seed),
        session_prefix="pretrain-eval",
    )  # fmt: skip
    model.train(was_training)
    _, summary, _ = score_trajectories(trajectories, tasks, make_judge("rule"))
    names = [
        call.name in task.tool_names
        for trajectory, task in zip(trajectories, tasks)
        for call in parse_tool_calls(trajectory.response_text).calls
    ]
    return {
        "tasks/name_f1": summary["name_f1"],
        "tasks/arg_match": summary["arg_match"],
        "tasks/success@0.7": summary["success@0.7"],
        "tasks/unoffered_calls": names.count(False) / max(1, len(names)),
    }


def prompt_as_trained(tokenizer: Any, exchange: list[dict[str, str]]) -> tuple[list[int], str]:
    """The prompt of a one-exchange drill as the corpus tokenises it, and the prompt text left over.

    The corpus tokenises whole conversations, so where a tokenizer merges the generation prompt's
    last characters with the answer's first ('\\n{' under the "words" pre-tokeniser), the model
    learnt to write that merged token after ``assistant``, never a bare newline's continuation.
    The prompt is cut before the first token that reaches into the answer; the text of the
    generation prompt after the cut (``"\\n"`` or ``""``) is what the model must write first."""
    prompt = render_chat(exchange[:1], (), add_generation_prompt=True)
    whole = render_chat(exchange, (), add_generation_prompt=False)
    encoded = tokenizer(whole, add_special_tokens=False, return_offsets_mapping=True)
    kept = 0
    while kept < len(encoded["input_ids"]) and encoded["offset_mapping"][kept][1] <= len(prompt):
        kept += 1
    cut = encoded["offset_mapping"][kept - 1][1] if kept else 0
    return encoded["input_ids"][:kept], prompt[cut:]


@torch.no_grad()
def drill_accuracy(
    model: torch.nn.Module, tokenizer: Any, per_kind: int = DRILLS_PER_KIND, seed: int = 123
) -> dict[str, float]:
    """Greedy exact-match rate on fresh one-exchange drills of each kind (values never seen),
    each prompted as the corpus tokenises it (:func:`prompt_as_trained`)."""
    rng = random.Random(seed)
    scores = {}
    stops = [tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.eos_token_id]
    for kind, build in DRILLS.items():
        exchanges = [build(rng) for _ in range(per_kind)]
        prompts = [prompt_as_trained(tokenizer, ex) for ex in exchanges]
        generations = sample(
            model, [ids for ids, _ in prompts], max_new_tokens=64, config=SamplingConfig(temperature=0.0),
            stop_token_ids=stops, pad_id=tokenizer.pad_token_id,
        )  # fmt: skip
        right = 0
        for generation, (_, rest), exchange in zip(generations, prompts, exchanges):
            written = tokenizer.decode(generation.token_ids, skip_special_tokens=True)
            right += written.startswith(rest) and written[len(rest) :].strip() == exchange[1]["content"]
        scores[f"drill/{kind}"] = right / per_kind
    return scores
