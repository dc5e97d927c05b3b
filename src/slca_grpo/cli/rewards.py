"""``slca score``: print every registered reward family's breakdown of one response as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    """Add the rewards subcommands to the ``slca`` parser."""
    parser = subparsers.add_parser(
        "score",
        help="score one response with every registered reward (HierR, ToolPO, RLTR, plugins)",
        description="Score one model response against a task and print each reward family's breakdown as JSON.",
    )
    parser.add_argument("--task", required=True, help="a task file: JSON (one task or a list) or JSONL")
    parser.add_argument("--id", dest="task_id", help="the task id (needed when the file holds several tasks)")
    parser.add_argument("--text", required=True, help="a file with the response text, or '-' for stdin")
    parser.add_argument("--judge", default="rule", help="'rule' (default) or 'openai:BASE_URL#MODEL'")
    parser.add_argument("--checker", default="rule", help="RLTR checker: 'rule' (default) or 'openai:BASE_URL#MODEL'")
    parser.add_argument("--irrelevant-fix", action="store_true", help="reward correct abstention on irrelevant tasks")
    parser.set_defaults(func=run_score)


def _read_task_dicts(path: Path) -> list[Any]:
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except ValueError:
        rows = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError as exc:
                    raise ValueError(f"{path}:{number}: invalid JSON ({exc})") from None
        return rows
    return data if isinstance(data, list) else [data]


def _select_task(rows: list[Any], task_id: str | None, path: Path) -> Any:
    from slca_grpo.data import task_from_dict

    if task_id is None:
        if len(rows) != 1:
            raise ValueError(f"{path} holds {len(rows)} tasks: choose one with --id")
        return task_from_dict(rows[0])
    for row in rows:
        if isinstance(row, dict) and str(row.get("id")) == task_id:
            return task_from_dict(row)
    raise ValueError(f"no task with id {task_id!r} in {path}")


def run_score(args: argparse.Namespace) -> int:
    from slca_grpo.rewards import RewardConfig, compute_rewards, list_rewards, make_checker, make_judge

    try:
        path = Path(args.task)
        task = _select_task(_read_task_dicts(path), args.task_id, path)
        text = sys.stdin.read() if args.text == "-" else Path(args.text).read_text(encoding="utf-8")
        config = RewardConfig(irrelevant_fix=args.irrelevant_fix)
        judge = make_judge(args.judge, config)
        checker = make_checker(args.checker, config)
    except (OSError, ValueError) as exc:
        print(f"slca score: {exc}", file=sys.stderr)
        return 2
    with judge:
        batch = compute_rewards([text], [task], judge, config, names=list_rewards(), checker=checker)
    checker.close()
    out = {
        "task_id": task.id,
        **batch.records[0].to_dict(),
        "judge": {"kind": judge.name, "calls": judge.calls, "failures": judge.failures},
    }
    print(json.dumps(out, indent=2, ensure_ascii=False))
    return 0
