"""User plugins: a module or file that registers a reward and an estimator reading it, loaded with
--plugin or train.plugins."""

import json
import textwrap

import pytest

from slca_grpo.algos import estimator_spec, list_estimators, unregister_estimator
from slca_grpo.cli import main
from slca_grpo.plugins import PluginError, load_plugin, split_plugin_args
from slca_grpo.rewards import list_reward_families, unregister_reward_family

PLUGIN = textwrap.dedent('''
    from slca_grpo.algos import register_estimator, route_by_segment
    from slca_grpo.algos.grouping import group_zscore
    from slca_grpo.rewards import register_reward

    @register_reward("{name}-calls")
    def valid_calls(parsed, task, config):
        """Valid tool calls, up to the number of gold calls."""
        return float(min(len(parsed.calls), len(task.flat_gold_calls)))

    @register_estimator("{name}", rewards=("{name}-calls",))
    def calls_only(group_index, segment_ids, rewards, config):
        """GRPO on the count of valid calls, routed to the tool tokens."""
        advantage = group_zscore(rewards["{name}-calls"], group_index)
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
        if f"{name}-calls" in list_reward_families():
            unregister_reward_family(f"{name}-calls")


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
    assert estimator_spec("tool-only-a").rewards == ("tool-only-a-calls",)
    assert "tool-only-a-calls" in list_reward_families()
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
    summary = train(load_yaml_config(RunConfig, resolve_config_path("demo-quick-tiny"), overrides), echo=False)
    assert summary["estimator"] == "tool-only-b" and summary["steps"] == 1
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    step = next(m for m in map(json.loads, lines) if "reward/tool-only-b-calls" in m)
    # Only the family the estimator reads ran: no HierR, so no judge request for training.
    assert 0 <= step["reward/tool-only-b-calls"] <= 3
    assert "reward/score" not in step and step["reward/judge_requests"] == 0


def test_an_estimator_reading_a_reward_nobody_provides_is_refused_before_training():
    from slca_grpo.algos import register_estimator
    from slca_grpo.config import ConfigError
    from slca_grpo.trainer.run_config import check_estimators

    register_estimator("reads-nothing-known", rewards=("no-such-reward",))(lambda g, s, r, c: None)
    try:
        with pytest.raises(ConfigError, match="estimator 'reads-nothing-known' reads reward 'no-such-reward'"):
            check_estimators(["reads-nothing-known"])
    finally:
        unregister_estimator("reads-nothing-known")
    with pytest.raises(ConfigError, match="rl.log_rewards names reward 'scor'"):
        check_estimators(["grpo"], ["scor"])
    check_estimators(["grpo", "toolpo"], ["score", "planner"])


BACKEND_PLUGIN = textwrap.dedent("""
    import json

    from slca_grpo.simulator.base import Backend, BackendResult
    from slca_grpo.simulator.core import register_backend


    class Echo(Backend):
        name = "echo"

        def __init__(self, prefix):
            self.prefix = prefix

        def generate(self, request):
            data = {"echo": self.prefix + request.call.name, "arguments": request.call.arguments}
            return BackendResult(text=json.dumps(data), data=data)


    @register_backend("echo")
    def make_echo(config):
        return Echo(config.backend_options.get("prefix", ""))
""")


def test_a_plugin_simulator_backend_is_chosen_by_name_with_its_own_options(tmp_path, capsys):
    from slca_grpo.simulator.core import list_backends, unregister_backend

    plugin = tmp_path / "echo_backend.py"
    plugin.write_text(BACKEND_PLUGIN)
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"type": "function", "function": {"name": "ping", "parameters": {}}}]))
    config = tmp_path / "sim.yaml"
    config.write_text("simulator:\n  backend: echo\n  backend_options: {prefix: 'via-'}\n")
    try:
        argv = ["--plugin", str(plugin), "simulate", "--tools", str(tools), "--call", '{"name": "ping"}']
        assert main([*argv, "--config", str(config)]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["error"] is None and json.loads(out["observation"]) == {"echo": "via-ping", "arguments": {}}
        assert "echo" in list_backends()
    finally:
        if "echo" in list_backends():
            unregister_backend("echo")
    assert main(["simulate", "--tools", str(tools), "--call", '{"name": "ping"}', "--backend", "echo"]) == 2
    assert "simulator.backend: unknown backend 'echo'" in capsys.readouterr().err
