"""Provenance: what code and environment a run was made with, and when two runs may be paired."""

import json
import re
from dataclasses import replace

import pytest
from smoke_run import smoke_config

import slca_grpo.provenance as provenance_module
from slca_grpo.engine import native, native_kernels_available
from slca_grpo.provenance import (
    PAIRING_FIELDS,
    ProvenanceDamaged,
    add_to_provenance,
    describe,
    pairing_key,
    provenance,
    read_provenance,
    record_provenance,
    source_digest,
)


def test_the_record_names_code_libraries_and_machine():
    record = provenance()
    assert set(PAIRING_FIELDS) <= set(record) and len(record["source_digest"]) == 16
    assert record["torch"] and record["python"] and record["cpu"]
    line = describe(record)
    assert record["source_digest"] in line and f"torch {record['torch']}" in line and record["cpu"] in line


def test_the_source_digest_sees_every_edit(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("x = 1\n")
    (package / "sub" / "b.yaml").write_text("k: v\n")
    first = source_digest(package)
    (package / "sub" / "b.yaml").write_text("k: w\n")
    assert source_digest(package) != first
    (package / "sub" / "b.yaml").write_text("k: v\n")
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert source_digest(package) == first  # caches are not code


def test_a_run_folder_records_it_once_and_reports_a_resume_with_other_code(tmp_path, monkeypatch):
    assert read_provenance(tmp_path) is None
    assert record_provenance(tmp_path) is None
    saved = read_provenance(tmp_path)
    assert saved == provenance()
    assert record_provenance(tmp_path) is None  # the same code and machine: nothing to say
    other = {**saved, "source_digest": "f" * 16}
    monkeypatch.setattr(provenance_module, "provenance", lambda: other)
    assert record_provenance(tmp_path) == saved  # the first record is kept, and returned
    assert read_provenance(tmp_path) == saved
    assert pairing_key(other) != pairing_key(saved)
    assert json.loads(json.dumps(provenance()))  # plain JSON


def test_a_resumed_run_with_other_code_warns(tmp_path, monkeypatch, capsys):
    from slca_grpo.trainer.run import train

    monkeypatch.setattr(native, "_switched_off", False)  # a run switches the kernels for its process
    config = smoke_config(tmp_path / "run", **{"rl.steps": 1, "sft.steps": 0, "train.eval_tasks": 0})
    train(config, echo=False)
    assert read_provenance(tmp_path / "run")["source_digest"] == provenance()["source_digest"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["provenance"] == provenance()
    # Which C kernels ran (calls of each in this run) is recorded beside the code and machine.
    ran = read_provenance(tmp_path / "run")["native_kernels"]
    assert ran == summary["native_kernels"] and set(ran) == {"decode_attention", "small_product"}
    off = smoke_config(tmp_path / "off", **{"rl.steps": 1, "sft.steps": 0, "train.eval_tasks": 0})
    train(replace(off, model=replace(off.model, native_kernels=False)), echo=False)
    assert read_provenance(tmp_path / "off")["native_kernels"] == {"decode_attention": 0, "small_product": 0}
    assert summary["native_kernels"]["decode_attention"] > 0 or native_kernels_available() is False
    (tmp_path / "run" / "provenance.json").write_text(json.dumps({**provenance(), "source_digest": "0" * 16}))
    train(config, resume=True, echo=False)  # finished: nothing to do, nothing written, nothing to warn of
    assert "was started with" not in capsys.readouterr().err
    train(replace(config, rl=replace(config.rl, steps=2)), resume=True, echo=False)  # one step more: it warns
    assert "was started with" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[1, 2]", "holds list, not an object"),
        ("{not json", "is not JSON"),
        ('{"commit": 12345}', "commit is int, not text"),
        ('{"torch": ["2.13"]}', "torch is list, not text"),
        ('{"dirty": "yes"}', "dirty is str, not true or false"),
        (b"\xff\xfe", "cannot be read (UnicodeDecodeError)"),
    ],
)
def test_a_damaged_record_is_one_line_and_is_never_replaced_by_todays(tmp_path, text, says):
    path = tmp_path / "provenance.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ProvenanceDamaged, match=f"provenance.json.*{re.escape(says)}"):
        read_provenance(tmp_path)
    with pytest.raises(ProvenanceDamaged):
        record_provenance(tmp_path)
    add_to_provenance(tmp_path, native_kernels={"decode_attention": 1})
    # Left as it was: today's record written over it would pair the run as made by this code.
    assert path.read_bytes() == (text if isinstance(text, bytes) else text.encode())


def test_a_record_is_printed_without_its_control_characters():
    record = {**provenance(), "cpu": "EPYC\x1b[2J\x1b]0;owned\x07", "commit": "\x1b[31mdeadbeef"}
    line = describe(record)
    assert "\x1b" not in line and "\x07" not in line
    assert "EPYC\\x1b[2J" in line and "commit \\x1b[3" in line


def test_a_run_with_a_damaged_record_trains_and_warns_and_keeps_it(tmp_path, capsys):
    from slca_grpo.trainer.run import train

    config = smoke_config(tmp_path / "run", **{"rl.steps": 1, "sft.steps": 0, "train.eval_tasks": 0})
    train(config, echo=False)
    path = tmp_path / "run" / "provenance.json"
    path.write_text('{"commit": 12345}')
    capsys.readouterr()
    summary = train(replace(config, rl=replace(config.rl, steps=2)), resume=True, echo=False)  # was a TypeError
    err = capsys.readouterr().err
    assert "provenance.json: commit is int, not text" in err and "cannot be paired" in err
    assert path.read_text() == '{"commit": 12345}'
    assert summary["steps"] == 2
