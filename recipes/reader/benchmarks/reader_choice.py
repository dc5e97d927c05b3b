"""Does a reader choose the offered tool by reading, or by recall? Teacher-forced, side by side.

For each model, the accuracy of the token of each called name that tells it from the other offered
names (the *choice*, ``recipes.reader.probes.called_name_tokens``) and of the name's
tokens after it (copies once the choice is made), on four sets of the same texts for every model:

- ``invented``: corpus documents with invented tools (new names and descriptions every document);
- ``corpus tasks``: corpus task documents (the suite's *train* split, tools disguised, values fresh);
- ``held-out tasks``: the same documents of the suite's *test* split (phrasings and tools the
  corpus never shows): what ``recipes.reader.pretrain`` logs as ``probe_heldout/choice_acc``;
- ``as evaluated``: synthetic test tasks as ``slca eval indomain`` prompts them (real tool names,
  no ``returns`` schema), the gold first call after the generation prompt; and the same tasks
  with their tools renamed as the corpus renames them (the catalogue's names are not in it).

Only each text's first call is scored (later ones may repeat it). Beside the models, a baseline
without one: the offered tool sharing the most words with the request. A model that reads does as
well on the held-out tasks as on its corpus, and at least as well as that baseline.

    python recipes/reader/benchmarks/reader_choice.py reader runs/build-8x128/model --docs 300
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import re
import sys
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository's root: the recipe

from recipes.reader.corpus import CorpusConfig, document, heldout_task_document
from recipes.reader.invented_tools import disguise
from recipes.reader.probes import called_name_spans, called_name_tokens, encode
from slca_grpo.chat.formatter import prompt_tools
from slca_grpo.chat.template import render_chat
from slca_grpo.data.synthetic import generate_suite, gold_messages
from slca_grpo.models import load_model


def evaluated_texts(count: int, disguised: bool = False) -> list[str]:
    """Synthetic test tasks that call, rendered as the evaluation prompts them, up to the first call;
    ``disguised``: their tools renamed as the corpus renames them (the only change)."""
    texts = []
    for task in generate_suite(seed=7, n_train=0, n_test=count).test:
        messages, tools = gold_messages(task), task.tools
        if disguised:
            messages, tools = disguise(messages, tools, random.Random(task.id), readable=True, catalogue_names=False)
        first = next((i for i, m in enumerate(messages) if m["role"] == "assistant" and m.get("tool_calls")), None)
        if first is not None:
            texts.append(render_chat(messages[: first + 1], prompt_tools(tools), add_generation_prompt=False))
    return texts


def text_sets(docs: int) -> dict[str, list[str]]:
    corpus = replace(CorpusConfig(), seed=CorpusConfig().seed + 1_000_003, warmup_docs=0)
    drawn = [document(index, corpus) for index in range(docs)]
    return {
        "invented": [text for kind, text in drawn if kind == "invented" and "<tool_call>" in text],
        "corpus tasks": [text for kind, text in drawn if kind == "task" and "<tool_call>" in text],
        "held-out tasks": [
            t for t in (heldout_task_document(i, corpus) for i in range(docs // 2)) if "<tool_call>" in t
        ],
        "as evaluated": evaluated_texts(docs // 2),
        "as evaluated, names disguised": evaluated_texts(docs // 2, disguised=True),
    }


@torch.no_grad()
def choice_scores(model, tokenizer, texts: list[str], max_len: int) -> tuple[float, float, int]:
    """(choice accuracy, accuracy on the name's tokens after its choice, number of choices), for
    the first called name of each text that has a choosing token (later ones may repeat it)."""
    right = {"choice": [0, 0], "after": [0, 0]}
    for text in texts:
        ids, offsets = encode(tokenizer, text)
        ids = ids[:max_len]
        predicted = model(input_ids=torch.tensor([ids])).logits[0].argmax(-1)
        first = next(
            ((spelled, choice) for spelled, choice in called_name_tokens(offsets, text) if choice is not None), None
        )
        if first is None:
            continue
        spelled, choice = first
        for position in [choice] + [p for p in spelled if p > choice]:
            if 0 < position < len(ids):
                kind = right["choice" if position == choice else "after"]
                kind[0] += int(predicted[position - 1]) == ids[position]
                kind[1] += 1
    (chosen, choices), (after, afters) = right["choice"], right["after"]
    return chosen / max(1, choices), after / max(1, afters), choices


_STOP_WORDS = frozenset(
    "a an the of to for in on at by with and or my me is are be it its this that what how can you".split()
)


def _words(text: str) -> set[str]:
    # Five-letter prefixes: a crude stem ("forecast" and "forecasts" meet, "book" and "booking").
    return {w[:5] for w in re.findall(r"[a-z]+", text.lower().replace("_", " ")) if len(w) > 2 and w not in _STOP_WORDS}


def word_overlap_score(texts: list[str]) -> float:
    """How often the first call's tool is the offered tool whose name and description share the most
    words with the request (a tie shared among the tied): what reading by words alone reaches."""
    right = 0.0
    for text in texts:
        system, rest = text.split("<|im_end|>", 1)
        request = _words(rest.split("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0])
        tools = [json.loads(line)["function"] for line in system.split("\n") if line.startswith('{"type": "function"')]
        overlap = {
            tool["name"]: len(request & _words(tool["name"] + " " + tool.get("description", ""))) for tool in tools
        }
        best = [name for name, count in overlap.items() if count == max(overlap.values())]
        called = [text[lo:hi] for lo, hi in called_name_spans(text)]
        right += (bool(called) and called[0] in best) / len(best)
    return right / max(1, len(texts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", help="model names (reader) or folders")
    parser.add_argument("--docs", type=int, default=300, help="corpus documents drawn (default 300)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        loaded = {name: load_model(name) for name in args.models}  # every model found before any work
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    sets = text_sets(args.docs)
    machine = platform.processor() or platform.machine()
    print(f"# {machine}, torch {torch.__version__}: accuracy on the choosing token / on the name after it (choices)")
    print("| model | " + " | ".join(sets) + " |")
    print("|---|" + "---:|" * len(sets))
    print(
        "| word overlap (no model) | "
        + " | ".join(f"{100 * word_overlap_score(t):.0f} %" for t in sets.values())
        + " |"
    )
    for name, (model, tokenizer) in loaded.items():
        model.eval()
        max_len = getattr(model.config, "max_position_embeddings", 4096)
        cells = []
        for texts in sets.values():
            choice, after, count = choice_scores(model, tokenizer, texts, max_len)
            cells.append(f"{100 * choice:.0f} % / {100 * after:.0f} % ({count})")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
