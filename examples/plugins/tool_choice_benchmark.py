"""A new benchmark as ``slca eval tool-choice``: does the policy's first call name the right tool?

    slca --plugin examples/plugins/tool_choice_benchmark.py eval tool-choice \
        --items examples/plugins/tool_choice.jsonl --policy smollm2 --out runs/tool-choice
    slca report runs/tool-choice runs/tool-choice-sft     # compare policies

Items are JSONL: ``{"id", "question", "tools" (OpenAI format), "expected_tool"}`` (null: no tool
fits, and the right answer calls none). Any policy spec works (``hf:PATH``, ``smollm2``,
``openai:URL#MODEL``), plus ``oracle``, which answers with the expected tool.
"""

import json
from pathlib import Path

from slca_grpo.chat import parse_tool_calls, render_tool_calls
from slca_grpo.cli import register_command
from slca_grpo.cli.common import fail
from slca_grpo.eval.agent import AgentRequest
from slca_grpo.eval.policies import resolve_model_agent
from slca_grpo.eval.report import write_eval_report

BENCHMARK = "tool-choice"


class Oracle:
    name = "oracle"

    def __init__(self, items):
        self.expected = {item["id"]: item["expected_tool"] for item in items}

    def respond(self, requests):
        answers = []
        for request in requests:
            tool = self.expected[request.key]
            answers.append(render_tool_calls([{"name": tool, "arguments": {}}]) if tool else "No tool fits this.")
        return answers


def read_items(path):
    items = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            item["id"], item["question"], item["tools"]  # noqa: B018 - the required fields
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{number}: not a tool-choice item ({exc})") from None
        items.append({"expected_tool": None, **item})
    return items


def run(args):
    try:
        items = read_items(args.items)
        agent = Oracle(items) if args.policy == "oracle" else resolve_model_agent(args.policy)
    except (OSError, ValueError) as exc:
        return fail(f"eval tool-choice: {exc}")
    requests = [
        AgentRequest([{"role": "user", "content": item["question"]}], item["tools"], key=item["id"]) for item in items
    ]
    rows = []
    for item, text in zip(items, agent.respond(requests)):
        names = [t["function"]["name"] for t in item["tools"]]
        calls = parse_tool_calls(text, names).calls
        chosen = calls[0].name if calls else None
        rows.append({"id": item["id"], "expected": item["expected_tool"], "chosen": chosen})
    correct = [row["chosen"] == row["expected"] for row in rows]
    metrics = {"accuracy": sum(correct) / max(1, len(rows))}
    summary = {"benchmark": BENCHMARK, "agent": agent.name, "n": len(rows), "metrics": metrics, **metrics}
    write_eval_report(args.out, rows, summary, title=f"{BENCHMARK}: {agent.name}", chart_keys=["accuracy"])
    print(f"[{BENCHMARK}] accuracy {100 * metrics['accuracy']:.1f}% on {len(rows)} items → {args.out}")
    return 0


def register(eval_subparsers):
    parser = eval_subparsers.add_parser(BENCHMARK, help="does the first call name the expected tool?")
    parser.add_argument("--items", required=True, help="JSONL items: id, question, tools, expected_tool")
    parser.add_argument("--policy", required=True, help="oracle, hf:PATH, smollm2 or openai:BASE_URL#MODEL")
    parser.add_argument("--out", default=f"runs/eval-{BENCHMARK}")
    parser.set_defaults(func=run)


register_command(register, under="eval")
