"""The BFCL harness end to end with bfcl-eval's real data and checkers (needs the ``bfcl`` extra)."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import textwrap
from importlib import metadata

import pytest

pytest.importorskip(
    "bfcl_eval", reason="install the bfcl extra: pip install --no-deps bfcl-eval==2026.3.23 mpmath filelock"
)

from slca_grpo.cli.bfcl import register_bfcl, resolve_agent  # noqa: E402
from slca_grpo.data.bfcl import package as bfcl_package  # noqa: E402
from slca_grpo.eval.agent import AgentRequest, ChatAgent  # noqa: E402
from slca_grpo.eval.bfcl import (  # noqa: E402
    EXCLUDED_CATEGORIES,
    PAPER_CATEGORIES,
    SUPPORTED_CATEGORIES,
    BFCLOracleAgent,
    MultiTurnEpisode,
    UnsupportedCategoryError,
    docs_to_tools,
    exposed_names,
    load_entries,
    resolve_categories,
    run_bfcl,
    score_single_turn,
)
from slca_grpo.eval.bfcl.multi_turn import live_instance_names  # noqa: E402


class ScriptedAgent:
    """Answers every request with ``script(request)``."""

    name = "scripted"

    def __init__(self, script):
        self.script = script
        self.requests: list[AgentRequest] = []

    def respond(self, requests):
        self.requests.extend(requests)
        return [self.script(request) for request in requests]


def tool_call(name: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def test_oracle_scores_100_percent_on_every_paper_category():
    agent = BFCLOracleAgent()
    assert isinstance(agent, ChatAgent)
    report = run_bfcl(agent, PAPER_CATEGORIES, limit=8, batch_size=4, progress=False)
    assert report.categories == list(PAPER_CATEGORIES)
    scores = report.category_scores()
    assert {c: (s.correct, s.total) for c, s in scores.items()} == {c: (8, 8) for c in PAPER_CATEGORIES}
    assert report.overall_accuracy == 1.0
    assert live_instance_names() == []  # every rollout released its backend instances


def test_real_docs_convert_to_valid_tool_schemas():
    from jsonschema import Draft202012Validator

    for category in PAPER_CATEGORIES:
        for entry in load_entries(category, 10):
            docs = entry.all_prompt_functions()
            names = exposed_names(docs)
            tools = docs_to_tools(docs, names)
            assert len({t["function"]["name"] for t in tools}) == len(docs)
            for tool in tools:
                assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", tool["function"]["name"])
                Draft202012Validator.check_schema(tool["function"]["parameters"])
                assert tool["function"]["parameters"]["type"] == "object"


def test_drop_corruption_lowers_accuracy_by_exactly_the_corrupted_share(tmp_path):
    agent = BFCLOracleAgent(corrupt=0.4, corrupt_mode="drop", seed=3)
    categories = ["simple_python", "parallel", "multi_turn_base", "multi_turn_miss_param"]
    report = run_bfcl(agent, categories, limit=10, out_dir=tmp_path, progress=False)
    expected: dict[str, float] = {}
    for category in categories:
        ids = [entry.id for entry in load_entries(category, 10)]
        corrupted = sum(agent.is_corrupted(i) for i in ids)
        expected[category] = 1 - corrupted / 10
    assert 0 < min(expected.values()) < 1  # the seed corrupts some, not all
    assert report.accuracy == pytest.approx(expected)
    assert report.overall_accuracy == pytest.approx(sum(expected.values()) / len(expected))
    for result in report.results:
        assert result.valid == (not agent.is_corrupted(result.id))
        if not result.valid:
            assert result.error_type in (
                "ast_decoder:no_function_call",
                "multi_turn:empty_turn_model_response",
            )

    lines = (tmp_path / "per_item.jsonl").read_text().splitlines()
    assert len(lines) == 40
    first = json.loads(lines[0])
    assert set(first) >= {"id", "category", "valid", "error_type", "responses", "calls"}
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["overall_accuracy"] == pytest.approx(report.overall_accuracy)
    assert summary["categories"]["parallel"]["total"] == 10
    markdown = (tmp_path / "report.md").read_text()
    assert "| parallel |" in markdown and "**overall**" in markdown
    assert (tmp_path / "accuracy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_altered_arguments_are_caught_by_the_checkers():
    agent = BFCLOracleAgent(corrupt=0.5, corrupt_mode="alter", seed=1)
    report = run_bfcl(agent, ["multiple", "live_simple", "multi_turn_base"], limit=8, progress=False)
    corrupted = [r for r in report.results if agent.is_corrupted(r.id)]
    assert corrupted and len(corrupted) < len(report.results)
    for result in report.results:
        if not agent.is_corrupted(result.id):
            assert result.valid, result.id
        elif result.calls[0] == [{"name": "ls", "arguments": {"a": False}}]:
            # Flipping ls(a=True) is harmless where the folder has no hidden files.
            assert result.id == "multi_turn_base_4"
        else:
            assert not result.valid, result.id
    assert sum(not r.valid for r in corrupted) == len(corrupted) - 1


def test_excluded_and_unknown_categories_are_refused_with_a_reason():
    with pytest.raises(UnsupportedCategoryError, match="web search"):
        resolve_categories(["web_search_base"])
    with pytest.raises(UnsupportedCategoryError, match="Hugging Face"):
        resolve_categories(["memory_vector"])
    with pytest.raises(UnsupportedCategoryError, match="relevance"):
        resolve_categories(["irrelevance"])
    with pytest.raises(UnsupportedCategoryError, match="unknown BFCL category"):
        resolve_categories(["simple_cobol"])
    assert resolve_categories(["simple", "java", "simple_python"]) == ["simple_python", "simple_java"]
    # Comma lists, as bfcl's own CLI takes them, mixed with separate names.
    assert resolve_categories(["simple_python,multiple", "java,"]) == ["simple_python", "multiple", "simple_java"]
    with pytest.raises(UnsupportedCategoryError, match="unknown BFCL category 'nope'"):
        resolve_categories(["simple,nope"])
    assert resolve_categories(None) == list(PAPER_CATEGORIES)
    assert set(EXCLUDED_CATEGORIES).isdisjoint(PAPER_CATEGORIES)


def test_single_turn_parsing_failures_are_values():
    entry = load_entries("simple_python", 1)[0]
    gold_name = next(iter(entry.ground_truth[0]))
    assert score_single_turn(entry, "<tool_call>{not json}</tool_call>").error_type == "ast_decoder:bad_json"
    assert score_single_turn(entry, tool_call("rm_rf", path="/")).error_type == "ast_decoder:unknown_tool"
    assert score_single_turn(entry, "The area is 25.").error_type == "ast_decoder:no_function_call"
    wrong = score_single_turn(entry, tool_call(gold_name, base=11, height=5))
    assert not wrong.valid and wrong.error_type.startswith("value_error")
    right = score_single_turn(entry, tool_call(gold_name, base=10, height=5))
    assert right.valid, right.error


def test_javascript_json_scalars_are_accepted_as_source_text():
    entry = load_entries("simple_javascript", 1)[0]
    assert entry.ground_truth == [{"validateUserInput": {"inputField": ["userInputField"], "isComplete": [True]}}]
    # The model sees string-typed parameters (bfcl-eval's prompt docs) but may send a JSON true.
    assert entry.prompt_functions[0]["parameters"]["properties"]["isComplete"]["type"] == "string"
    result = score_single_turn(entry, tool_call("validateUserInput", inputField="userInputField", isComplete=True))
    assert result.valid, result.error
    result = score_single_turn(entry, tool_call("validateUserInput", inputField="userInputField", isComplete="false"))
    assert not result.valid


def test_injection_attempts_are_rejected_and_not_executed():
    entry = load_entries("multi_turn_base", 1)[0]
    episode = MultiTurnEpisode(entry)
    try:
        text = tool_call("__import__('os').system", command="echo pwned") + tool_call("cd", folder="document")
        episode.receive(text)
        outputs = [m["content"] for m in episode.messages if m["role"] == "tool"]
        assert len(outputs) == 2
        assert outputs[0].startswith("Error: invalid call") and "not a plain identifier" in outputs[0]
        assert "document" in outputs[1] and "Error" not in outputs[1]
        assert episode.decoded[0] == [["cd(folder='document')"]]  # only the validated call reached bfcl
        assert episode.calls[0][0]["error"]
    finally:
        episode.close()


def test_backend_state_does_not_leak_between_rollouts_of_the_same_entry():
    entry = load_entries("multi_turn_base", 1)[0]
    first, second = MultiTurnEpisode(entry), MultiTurnEpisode(entry)
    try:
        assert first.rollout_name != second.rollout_name
        first.receive(tool_call("mkdir", dir_name="leak_probe") + tool_call("ls"))
        assert "leak_probe" in first.messages[-1]["content"]
        second.receive(tool_call("ls"))
        assert "leak_probe" not in second.messages[-1]["content"]
        assert "document" in second.messages[-1]["content"]
    finally:
        first.close()
        second.close()
    assert live_instance_names(first.rollout_name) == [] and live_instance_names(second.rollout_name) == []
    # Two full runs of the same entry score the same and leave nothing behind.
    verdicts = [
        run_bfcl(BFCLOracleAgent(), ["multi_turn_base"], limit=1, progress=False).overall_accuracy for _ in range(2)
    ]
    assert verdicts == [1.0, 1.0]
    assert live_instance_names() == []


def test_miss_func_turn_adds_tools_and_hidden_functions_are_refused():
    entry = next(e for e in load_entries("multi_turn_miss_func", 3) if e.id == "multi_turn_miss_func_0")
    assert {turn: [d["name"] for d in docs] for turn, docs in entry.missed_functions.items()} == {3: ["sort"]}
    seen: list[tuple[int, list[str], str]] = []

    def script(request: AgentRequest) -> str:
        names = [tool["function"]["name"] for tool in request.tools]
        turn = request.metadata["turn"]
        seen.append((turn, names, request.messages[-1]["content"] if request.metadata["turn_step"] == 0 else ""))
        if turn == 0 and request.metadata["turn_step"] == 0:
            return tool_call("sort", file_name="final_report.pdf")  # not offered yet
        return "ok"

    agent = ScriptedAgent(script)
    report = run_bfcl(agent, ["multi_turn_miss_func"], limit=1, progress=False)
    result = report.results[0]
    assert not result.valid
    assert "not available" in result.calls[0][0]["error"]
    turn_starts = [s for s in seen if s[2]]
    assert "sort" not in turn_starts[0][1] and "sort" in turn_starts[3][1]
    assert turn_starts[3][2] == bfcl_package.load_bfcl().additional_function_prompt


def test_step_limit_force_terminates_a_looping_agent():
    agent = ScriptedAgent(lambda request: tool_call("pwd"))
    report = run_bfcl(agent, ["multi_turn_base"], limit=1, max_steps_per_turn=3, progress=False)
    result = report.results[0]
    assert result.error_type == "multi_turn:force_terminated"
    assert len(result.responses) == 4 and result.turns == [[0, 1, 2, 3]]
    assert live_instance_names() == []


def test_agent_returning_the_wrong_number_of_answers_is_an_error():
    class Broken:
        name = "broken"

        def respond(self, requests):
            return []

    with pytest.raises(ValueError, match="returned 0 answers for 1 requests"):
        run_bfcl(Broken(), ["simple_python"], limit=1, progress=False)


def test_cli_runs_the_oracle_and_refuses_unknown_specs(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="slca eval")
    register_bfcl(parser.add_subparsers(dest="eval_command"))
    args = parser.parse_args(
        [
            "bfcl",
            "--policy",
            "oracle",
            "--categories",
            "simple",
            "java",
            "--limit",
            "2",
            "--out",
            str(tmp_path),
            "--no-progress",
        ]
    )
    assert args.func(args) == 0
    assert "| simple_java | 100.00 | 2 | 2 |" in capsys.readouterr().out
    assert json.loads((tmp_path / "summary.json").read_text())["overall_accuracy"] == 1.0
    web_search = ["bfcl", "--policy", "oracle", "--categories", "web_search_base", "--out", str(tmp_path)]
    args = parser.parse_args([*web_search, "--no-progress"])
    assert args.func(args) == 2
    err = capsys.readouterr().err  # the folder holds the first evaluation: refused before any work
    assert f"--out {tmp_path} already holds a run (summary.json, report.md); add --force to replace it" in err
    args = parser.parse_args([*web_search, "--no-progress", "--force"])
    assert args.func(args) == 2
    assert "excluded" in capsys.readouterr().err
    args = parser.parse_args(["bfcl", "--policy", "smollm2", "--max-new-tokens", "0", "--out", str(tmp_path / "b")])
    assert args.func(args) == 2
    assert "--max-new-tokens must be >= 1" in capsys.readouterr().err
    with pytest.raises(ValueError, match="not a checkpoint folder"):
        resolve_agent("hf:/nowhere")
    with pytest.raises(ValueError, match="unknown policy spec"):
        resolve_agent("gpt-9")
    corrupted = resolve_agent("oracle:corrupt=0.25,mode=alter,seed=7")
    assert (corrupted.corrupt, corrupted.corrupt_mode, corrupted.seed) == (0.25, "alter", 7)
    with pytest.raises(ValueError, match="bad oracle option"):
        resolve_agent("oracle:corrupt=lots")


def test_missing_package_gives_the_install_command(monkeypatch):
    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(bfcl_package.metadata, "version", not_installed)
    with pytest.raises(bfcl_package.BFCLNotInstalledError, match="pip install --no-deps bfcl-eval=="):
        bfcl_package.load_bfcl.__wrapped__()


def test_import_is_isolated_from_site_packages_and_provider_sdks(tmp_path):
    """In a fresh interpreter: nothing is written next to the package, no SDK is imported."""
    import bfcl_eval

    package_dir = __import__("pathlib").Path(bfcl_eval.__file__).resolve().parent
    site_dir = package_dir.parent
    script = textwrap.dedent(
        f"""
        import json, os, sys
        from pathlib import Path
        package_dir, site_dir = Path({str(package_dir)!r}), Path({str(site_dir)!r})
        SDKS = ("openai", "anthropic", "google.genai", "mistralai", "cohere", "boto3")

        def listing():
            files = [str(p) for p in package_dir.rglob("*") if "__pycache__" not in p.parts]
            return sorted(p.name for p in site_dir.iterdir()), sorted(files)

        before = listing()
        from slca_grpo.eval.bfcl import BFCLOracleAgent, run_bfcl, load_bfcl
        report = run_bfcl(BFCLOracleAgent(), ["simple_python", "multi_turn_base"], limit=1, progress=False)
        after = listing()
        bfcl = load_bfcl()
        print(json.dumps({{
            "same": before == after,
            "accuracy": report.overall_accuracy,
            "root": str(bfcl.project_root),
            "root_exists": bfcl.project_root.exists(),
            "stand_in": sys.modules["bfcl_eval.constants.model_config"].__doc__,
            "sdks": sorted(m for m in SDKS if m in sys.modules),
            "handlers": sorted(m for m in sys.modules if m.startswith("bfcl_eval.model_handler")),
            "env": os.environ.get("BFCL_PROJECT_ROOT"),
        }}))
        """
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert completed.returncode == 0, completed.stderr
    facts = json.loads(completed.stdout.strip().splitlines()[-1])
    assert facts["same"] is True
    assert facts["accuracy"] == 1.0
    assert facts["root_exists"] is True and "slca-bfcl-" in facts["root"]
    assert not facts["root"].startswith(str(site_dir))
    assert "stand-in" in facts["stand_in"]
    assert facts["sdks"] == [] and facts["handlers"] == []
    assert facts["env"] is None  # the variable is restored after the import
    assert not __import__("pathlib").Path(facts["root"]).exists()  # removed at interpreter exit


@pytest.mark.slow
def test_oracle_fails_only_where_the_gold_answer_is_unsatisfiable():
    """All entries of every supported category (~10 s): each oracle failure is one of the
    documented gold-data defects (docs/evaluation.md)."""
    report = run_bfcl(BFCLOracleAgent(), SUPPORTED_CATEGORIES, progress=False)
    failures = sorted(r.id for r in report.results if not r.valid)
    assert failures == [
        "live_multiple_862-181-3",  # gold uses a parameter the function does not declare
        "live_multiple_964-207-0",  # gold parameter name differs from the declared required one
        "live_simple_106-63-0",  # a required parameter whose allowed list is empty
        "live_simple_112-68-0",  # idem
        "multi_turn_miss_func_49",  # gold calls `tail` two turns before it is offered
        "simple_java_36",  # any-typed list elements are compared as non-strings
        "simple_java_64",  # HashMap gold value is not a list of allowed values
        "simple_java_65",  # any-typed list elements are compared as non-strings
    ]
