"""User plugins: a module or file that registers an estimator, loaded with --plugin or train.plugins."""

import textwrap

import pytest

from slca_grpo.algos import estimator_spec, list_estimators, unregister_estimator
from slca_grpo.cli import main
from slca_grpo.plugins import PluginError, load_plugin, split_plugin_args

PLUGIN = textwrap.dedent('''
    from slca_grpo.algos import register_estimator, route_by_segment
    from slca_grpo.algos.grouping import group_zscore

    @register_estimator("{name}", rewards=("tool",))
    def tool_only(group_index, segment_ids, rewards, config):
        """GRPO on R_tool alone, routed to the tool tokens."""
        advantage = group_zscore(rewards["tool"], group_index)
        return route_by_segment(segment_ids, advantage, advantage.new_zeros(advantage.shape))
''')


@pytest.fixture
def plugin_file(tmp_path):
    def make(name):
        path = tmp_path / f"{name}.py"
        path.write_text(PLUGIN.format(name=name))
        return path

    yield make
    for name in ("tool-only-a", "tool-only-b", "tool-only-c"):
        if name in list_estimators():
            unregister_estimator(name)


def test_plugin_args_are_taken_from_anywhere_on_the_line():
    assert split_plugin_args(["--plugin", "a.py", "train", "x", "--plugin=b", "--set", "k=v"]) == (
        ["a.py", "b"],
        ["train", "x", "--set", "k=v"],
    )
    assert split_plugin_args(["train", "--", "--plugin", "c"]) == ([], ["train", "--", "--plugin", "c"])
    with pytest.raises(PluginError, match="needs a module"):
        split_plugin_args(["estimators", "--plugin"])


def test_a_plugin_file_registers_its_estimator_once(plugin_file, capsys):
    path = plugin_file("tool-only-a")
    assert main(["estimators", "--plugin", str(path)]) == 0
    assert "tool-only-a" in capsys.readouterr().out
    assert estimator_spec("tool-only-a").rewards == ("tool",)
    assert load_plugin(str(path)) is load_plugin(str(path))  # imported once: no duplicate registration


def test_bad_plugins_are_one_line_errors(tmp_path, capsys):
    assert main(["--plugin", str(tmp_path / "missing.py"), "estimators"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["--plugin", "no_such_plugin_module", "estimators"]) == 2
    assert "plugin module 'no_such_plugin_module' not found" in capsys.readouterr().err
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    assert main(["--plugin", str(broken), "estimators"]) == 2
    assert f"plugin {broken} failed to import: RuntimeError: boom" in capsys.readouterr().err


def test_a_training_run_uses_a_plugin_estimator_from_its_config(plugin_file, tmp_path):
    from slca_grpo.config import load_yaml_config
    from slca_grpo.presets import resolve_config_path
    from slca_grpo.trainer.run import RunConfig, train

    path = plugin_file("tool-only-b")
    overrides = [
        f"train.plugins=[{path}]",
        "rl.estimator=tool-only-b",
        f"train.out_dir={tmp_path / 'run'}",
        "data.n_train=40",
        "data.n_test=4",
        "sft.steps=2",
        "sft.batch_size=4",
        "rl.steps=1",
        "rl.prompts_per_step=2",
        "rl.mini_batch_prompts=2",
        "rollout.group_size=2",
        "rollout.max_response_tokens=16",
        "train.eval_tasks=2",
        "train.progress=false",
    ]
    summary = train(load_yaml_config(RunConfig, resolve_config_path("demo-quick"), overrides), echo=False)
    assert summary["estimator"] == "tool-only-b" and summary["steps"] == 1
