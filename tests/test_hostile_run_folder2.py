"""Run folders people misuse: a resume that changes a setting or lacks the run's plugin, two
processes writing one folder, an export aimed at a folder that holds other files (or at the run
itself), a model name that is not a model. Each is one line naming the key or file and what to do."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch
import yaml

import slca_grpo.plugins as plugins
from slca_grpo.algos import list_estimators, unregister_estimator
from slca_grpo.cli import main
from slca_grpo.config import ConfigError, load_yaml_config, load_yaml_text
from slca_grpo.models import build_tiny
from slca_grpo.models.checkpoint import save_checkpoint, save_pretrained_atomic
from slca_grpo.presets import resolve_config_path
from slca_grpo.trainer.run import RunConfig
from slca_grpo.trainer.run_folder import LOCK_FILE, hold_run_folder

TINY_RUN = [
    "data.n_train=40",
    "data.n_test=2",
    "sft.steps=2",
    "sft.batch_size=4",
    "rl.steps=1",
    "rl.prompts_per_step=2",
    "rl.mini_batch_prompts=2",
    "rollout.group_size=2",
    "rollout.max_response_tokens=16",
    "train.eval_tasks=0",
    "train.save_every=1",
    "train.progress=false",
]


def sets(*overrides: str) -> list[str]:
    return [arg for override in overrides for arg in ("--set", override)]


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    last = err.splitlines()[-1]  # after any warnings a resume prints first
    assert last.startswith("error: "), err
    return last


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A one-step run with its checkpoint (shared: the tests below only resume or read it)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    assert main(["train", "demo-quick-tiny", *sets(*TINY_RUN, f"train.out_dir={out}")]) == 0
    return out


PLUGIN = textwrap.dedent('''
    from slca_grpo.algos import register_estimator, route_by_segment
    from slca_grpo.algos.grouping import group_zscore

    @register_estimator("plugin-resume-grpo", rewards=("score",))
    def plugin_resume_grpo(group_index, segment_ids, rewards, config):
        """GRPO, registered by a plugin file."""
        advantage = group_zscore(rewards["score"], group_index)
        return route_by_segment(segment_ids, advantage, advantage)
''')


def test_a_run_started_with_a_plugin_records_it_and_resumes_with_it(tmp_path, monkeypatch, capsys):
    path = tmp_path / "my_estimator.py"
    path.write_text(PLUGIN)
    out = tmp_path / "run"
    argv = ["--plugin", str(path), "train", "demo-quick-tiny"]
    try:
        assert main([*argv, *sets(*TINY_RUN, "rl.estimator=plugin-resume-grpo", f"train.out_dir={out}")]) == 0
        recorded = yaml.safe_load((out / "config.yaml").read_text())["train"]["plugins"]
        assert str(path.resolve()) in recorded

        # A fresh process: the plugin is neither imported nor registered until the run loads it.
        unregister_estimator("plugin-resume-grpo")
        monkeypatch.setattr(plugins, "_LOADED", {})
        assert main(["train", str(out / "config.yaml"), "--resume"]) == 0
        assert "plugin-resume-grpo" in list_estimators()

        # A run recorded before plugins were: the error says how to give the plugin.
        unregister_estimator("plugin-resume-grpo")
        monkeypatch.setattr(plugins, "_LOADED", {})
        config = yaml.safe_load((out / "config.yaml").read_text())
        config["train"]["plugins"] = []
        (out / "config.yaml").write_text(yaml.safe_dump(config))
        capsys.readouterr()
        assert main(["train", str(out / "config.yaml"), "--resume"]) == 2
        err = one_error_line(capsys)
        assert "unknown estimator(s) plugin-resume-grpo" in err and "--plugin MODULE_OR_FILE" in err
    finally:
        if "plugin-resume-grpo" in list_estimators():
            unregister_estimator("plugin-resume-grpo")


def test_a_resume_refuses_a_changed_setting_but_not_a_display_one(finished_run, capsys):
    saved = (finished_run / "config.yaml").read_text()
    assert main(["train", str(finished_run / "config.yaml"), "--resume", *sets("rl.lr=0.1")]) == 2
    err = one_error_line(capsys)
    assert "other settings (rl.lr: 0.0005 there, 0.1 now)" in err and "another train.out_dir" in err
    assert (finished_run / "config.yaml").read_text() == saved  # the record still tells the truth
    # Where it runs and how it shows progress are no settings of the run.
    assert main(["train", str(finished_run / "config.yaml"), "--resume", *sets("train.progress=true")]) == 0


def test_resuming_a_copied_run_through_its_config_never_writes_the_original(finished_run, tmp_path, capsys):
    copied = tmp_path / "copy"
    shutil.copytree(finished_run, copied)
    assert main(["train", str(copied / "config.yaml"), "--resume"]) == 2
    err = one_error_line(capsys)
    assert f"its train.out_dir {finished_run} is another folder" in err
    assert f"--set train.out_dir={copied}" in err


def test_a_run_folder_as_model_name_lists_its_checkpoints_before_anything_is_created(finished_run, tmp_path, capsys):
    out = tmp_path / "never"
    argv = ["train", "demo-quick-tiny"]
    assert main([*argv, *sets(f"model.name={finished_run}", f"train.out_dir={out}")]) == 2
    err = one_error_line(capsys)
    assert err.startswith(f"error: model.name: {finished_run} is not a checkpoint folder")
    assert "its checkpoints are step-000000" in err
    assert f"use {finished_run / 'checkpoints' / 'step-000000' / 'model'}" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([*argv, *sets(f"model.name={empty}", f"train.out_dir={out}")]) == 2
    assert "it holds no checkpoints" in one_error_line(capsys)
    assert main([*argv, *sets("model.name=no-such-model", f"train.out_dir={out}")]) == 2
    assert one_error_line(capsys).startswith("error: model.name: unknown model 'no-such-model'")
    assert not out.exists()


def test_an_empty_out_dir_is_refused_naming_the_key(capsys):
    for value in ("", "' '"):
        with pytest.raises(ConfigError, match="train.out_dir is empty"):
            load_yaml_config(RunConfig, resolve_config_path("demo-quick-tiny"), [f"train.out_dir={value}"])
    assert main(["train", "demo-quick-tiny", "--set", "train.out_dir="]) == 2
    assert one_error_line(capsys) == "error: train.out_dir is empty: name the run's folder, e.g. runs/my-run"


def test_a_key_written_twice_in_a_config_file_is_refused_naming_it_and_its_line(tmp_path, capsys):
    config = tmp_path / "twice.yaml"
    config.write_text("rl:\n  lr: 0.001\n  steps: 2\n  lr: 0.1\n")
    assert main(["train", str(config)]) == 2
    assert one_error_line(capsys) == (
        f"error: {config}: line 4: key 'lr' is written twice in one section (also on line 2); keep one of them"
    )
    config.write_text("rl: {steps: 2}\ntrain: {}\nrl: {lr: 0.1}\n")
    with pytest.raises(ConfigError, match="line 3: key 'rl' is written twice"):
        load_yaml_config(RunConfig, config)
    # A key brought in by a merge may still be overridden.
    assert load_yaml_text("base: &b {lr: 1}\nrl:\n  <<: *b\n  lr: 2\n")["rl"] == {"lr": 2}


def run_python(code: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=240, check=False
    )


def test_a_second_writer_of_a_run_folder_is_told_who_holds_it(tmp_path):
    out = tmp_path / "run"
    argv = ["train", "demo-quick-tiny", *sets(*TINY_RUN, f"train.out_dir={out}")]
    with hold_run_folder(out, "the first writer"):
        done = run_python(f"import sys; from slca_grpo.cli import main; sys.exit(main({argv!r}))", tmp_path)
    err = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(err) == 1, done.stderr
    assert err[0].startswith(f"error: {out} is being written by pid {os.getpid()} (the first writer, started ")
    assert err[0].endswith("; wait until it ends, or give this run another train.out_dir")
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]  # the second writer wrote nothing


def test_a_lock_file_left_by_a_dead_process_does_not_block(tmp_path):
    out = tmp_path / "run"
    code = (
        "import os; from slca_grpo.trainer.run_folder import hold_run_folder; "
        f"hold_run_folder({str(out)!r}, 'a crashed writer').__enter__(); os._exit(0)"  # dies holding it
    )
    assert run_python(code, tmp_path).returncode == 0
    assert "a crashed writer" in (out / LOCK_FILE).read_text()
    with hold_run_folder(out, "the next writer"):
        assert (out / LOCK_FILE).read_text().startswith(f"pid {os.getpid()} (the next writer, started ")


def test_a_second_study_on_one_out_is_refused(tmp_path, capsys):
    out = tmp_path / "study"
    with hold_run_folder(out, "slca study"):  # a second open of the lock file conflicts, even in one process
        assert main(["study", "--quick", "--out", str(out)]) == 2
    err = one_error_line(capsys)
    assert f"{out} is being written by pid {os.getpid()} (slca study, started " in err
    assert err.endswith("give it another --out")


@pytest.fixture
def lora_run(tmp_path):
    """A run folder with two LoRA checkpoints on a tiny base kept as its sft/ folder."""
    from slca_grpo.models.config import LoraConfig
    from slca_grpo.models.lora import add_adapters

    torch.manual_seed(0)
    model, tokenizer = build_tiny("tiny", corpus_texts=["hello world tool call"] * 20, vocab_size=300)
    run = tmp_path / "run"
    save_pretrained_atomic(model, tokenizer, run / "sft")
    policy = add_adapters(copy.deepcopy(model), LoraConfig(r=4))
    for step in (0, 1):
        save_checkpoint(
            run / "checkpoints",
            step,
            model=policy,
            tokenizer=tokenizer,
            state={"trainer": {}},
            info={"history": {}, "lora_base": str(run / "sft")},
        )
    return run


def test_export_of_a_run_folder_takes_its_newest_checkpoint(lora_run, tmp_path, capsys):
    out = tmp_path / "merged"
    assert main(["export", str(lora_run), "--out", str(out)]) == 0
    assert f"(from {lora_run / 'checkpoints' / 'step-000001'})" in capsys.readouterr().out
    assert (out / "config.json").is_file()
    (lora_run / "checkpoints" / "step-000000").rename(lora_run / "elsewhere")
    (lora_run / "checkpoints" / "step-000001").rename(lora_run / "elsewhere2")
    assert main(["export", str(lora_run), "--out", str(tmp_path / "other")]) == 2
    assert one_error_line(capsys) == f"error: {lora_run} holds no checkpoints yet (its run has not saved one)"


def test_export_leaves_an_occupied_out_alone_unless_forced(lora_run, tmp_path, capsys):
    out = tmp_path / "occupied"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["export", str(lora_run), "--out", str(out)]) == 2
    assert one_error_line(capsys) == (
        f"error: --out {out} is not an empty folder; choose a new one, or pass --force to replace it"
    )
    assert (out / "notes.txt").read_text() == "mine"
    assert main(["export", str(lora_run), "--out", str(out), "--force"]) == 0
    assert (out / "config.json").is_file() and not (out / "notes.txt").exists()


@pytest.mark.parametrize("where", ["checkpoints/step-000001/model", "merged", ".."])
def test_export_never_writes_into_the_run_it_exports_from(lora_run, capsys, where):
    adapters = lora_run / "checkpoints" / "step-000001" / "model"
    before = {p.name: p.read_bytes() for p in adapters.iterdir()}
    out = (lora_run / where).resolve() if where == ".." else lora_run / where
    assert main(["export", str(lora_run / "checkpoints" / "step-000001"), "--out", str(out), "--force"]) == 2
    err = one_error_line(capsys)
    assert f"--out {out} is inside (or holds) the run {lora_run.resolve()} it exports from" in err
    assert {p.name: p.read_bytes() for p in adapters.iterdir()} == before
    assert not (lora_run / "merged").exists()


def test_train_refuses_a_folder_holding_a_run_unless_resumed_or_forced(tmp_path, monkeypatch, capsys):
    import slca_grpo.trainer.run as run_module

    ran = []
    monkeypatch.setattr(run_module, "train", lambda config, resume=False: ran.append(resume) or {})
    finished = tmp_path / "finished"
    finished.mkdir()
    (finished / "config.yaml").write_text("train: {}\n")  # written at a run's start: not work on its own
    (finished / "summary.json").write_text("{}")
    args = ["train", "demo-quick-tiny", "--set", f"train.out_dir={finished}"]
    assert main(args) != 0 and not ran
    message = capsys.readouterr().err.strip()
    assert "already holds a run (summary.json)" in message and "--force" in message
    assert len(message.splitlines()) == 1
    assert (finished / "summary.json").read_text() == "{}"  # nothing touched
    assert main([*args, "--force"]) == 0 and ran == [False]  # writing over it was asked for
    (finished / "summary.json").unlink()  # a start that failed before any step is run again as it is
    assert main(args) == 0 and ran == [False, False]
    (tmp_path / "file").write_text("x")
    inside = tmp_path / "run" / "checkpoints" / "step-000001"
    inside.mkdir(parents=True)
    for out, why in ((tmp_path / "file", "is a file"), (inside, "inside the checkpoint")):
        assert main(["train", "demo-quick-tiny", "--set", f"train.out_dir={out}", "--force"]) != 0
        assert why in capsys.readouterr().err
    assert ran == [False, False]


def test_a_model_folder_with_damaged_weights_is_one_line_in_train_and_bench(finished_run, tmp_path, capsys):
    from slca_grpo.models import load_model

    folder = tmp_path / "model"
    shutil.copytree(finished_run / "checkpoints" / "step-000000" / "model", folder)
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    for damage in (data[: len(data) // 2], b"", os.urandom(1000)):  # truncated, empty, garbage
        weights.write_bytes(damage)
        with pytest.raises(ValueError, match=f"^model folder {folder} cannot be loaded: ") as error:
            load_model(folder)
        assert "\n" not in str(error.value)
    for argv in (  # the garbage, through both commands
        ["train", "demo-quick-tiny", *sets(f"model.name={folder}", f"train.out_dir={tmp_path / 'out'}")],
        ["bench", "demo-quick-tiny", "--steps", "0", "--sft-steps", "0", *sets(f"model.name={folder}")],
    ):
        assert main(argv) == 2, argv
        err = one_error_line(capsys)
        assert err.startswith(f"error: model.name: model folder {folder} cannot be loaded: "), err
    assert weights.stat().st_size == 1000  # left as it was
