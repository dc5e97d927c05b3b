"""Plugins with settings of their own: an estimator configured as ``rl.advantage.<name>.*`` and a
reward as ``reward.<family>.*``, each one user file; batch reward functions; the one registry type
and its rule for names; the verl name clash."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from reward_helpers import TASK, TEXTS
from scripted import scripted_loop, two_step_setup

from slca_grpo.algos import (
    SEG_TOOL,
    AdvantageConfig,
    estimator_spec,
    list_estimators,
    register_estimator,
    route_by_segment,
    segments_from_mask,
    unregister_estimator,
)
from slca_grpo.algos.registry import ESTIMATORS
from slca_grpo.cli import COMMANDS
from slca_grpo.config import ConfigError, from_dict, load_yaml_config, save_yaml_config, to_dict
from slca_grpo.integrations.verl.advantages import batch_advantages, check_no_clash_with_verl
from slca_grpo.integrations.verl.config import read_section
from slca_grpo.plugins import load_plugin
from slca_grpo.presets import resolve_config_path
from slca_grpo.rewards import (
    RewardConfig,
    RuleJudge,
    compute_rewards,
    list_reward_families,
    register_reward,
    unregister_reward_family,
)
from slca_grpo.rewards.registry import REWARD_FAMILIES
from slca_grpo.simulator.core import SIMULATOR_BACKENDS
from slca_grpo.trainer.run_config import RunConfig

ESTIMATOR_PLUGIN = textwrap.dedent('''
    from dataclasses import dataclass

    from slca_grpo.algos import register_estimator, route_by_segment
    from slca_grpo.config import ConfigError


    @dataclass(frozen=True)
    class ConstantSettings:
        value: float = 1.0

        def __post_init__(self):
            if not self.value > 0:
                raise ConfigError(f"value must be > 0, got {{self.value!r}}")


    @register_estimator("{name}", rewards=("score",), settings=ConstantSettings)
    def constant(group_index, segment_ids, rewards, config, settings):
        """Every learnable token gets rl.advantage.{name}.value."""
        values = rewards["score"].double() * 0 + settings.value
        return route_by_segment(segment_ids, values, values)
''')

REWARD_PLUGIN = textwrap.dedent('''
    from dataclasses import dataclass

    from slca_grpo.rewards import register_reward


    @dataclass(frozen=True)
    class WordSettings:
        max_words: int = 40


    @register_reward("{name}", settings=WordSettings)
    def brief(parsed, task, config, settings):
        """1 when the answer has at most max_words words, else 0."""
        return float(len(parsed.final_answer.split()) <= settings.max_words)
''')

SEGMENTS = torch.tensor([[0, 1, 1, 0, 2], [0, 1, 0, 2, 2]])


@pytest.fixture
def plugin_file(tmp_path):
    """Writes a plugin file; whatever it registered is unregistered afterwards."""
    written = []

    def make(template: str, name: str):
        path = tmp_path / f"{name}.py"
        path.write_text(template.format(name=name))
        written.append(name)
        return path

    yield make
    for name in written:
        if name in list_estimators():
            unregister_estimator(name)
        if name in list_reward_families():
            unregister_reward_family(name)


def test_an_estimator_with_its_own_setting_is_set_on_the_line_and_in_yaml(plugin_file, tmp_path, capsys):
    path = plugin_file(ESTIMATOR_PLUGIN, "constant-probe")
    preset = resolve_config_path("demo-quick-tiny")
    plugins = f"train.plugins=[{path}]"
    # --set: the plugin named in the overrides is imported before the config is read.
    config = load_yaml_config(RunConfig, preset, [plugins, "rl.advantage.constant-probe.value=0.25"])
    assert config.rl.advantage.settings["constant-probe"].value == 0.25
    assert config.rl.advantage.lambda_tool == 1.0  # the shared knobs keep their flat keys

    # YAML, as a run's config.yaml records it: the resume reads it back the same.
    saved = tmp_path / "config.yaml"
    save_yaml_config(config, saved)
    assert "constant-probe:\n      value: 0.25" in saved.read_text()
    assert load_yaml_config(RunConfig, saved) == config
    yaml_file = tmp_path / "run.yaml"
    yaml_file.write_text(f"train:\n  plugins: [{path}]\nrl:\n  advantage:\n    constant-probe:\n      value: 0.5\n")
    assert load_yaml_config(RunConfig, yaml_file).rl.advantage.settings["constant-probe"].value == 0.5

    # The estimator object reads its settings from the section it is handed.
    estimator = estimator_spec("constant-probe")
    advantages = estimator.advantages(
        group_ids=[0, 0], segment_ids=SEGMENTS, rewards={"score": [1.0, 0.0]}, config=config.rl.advantage
    )
    assert torch.equal(advantages, 0.25 * (SEGMENTS > 0).float())
    default = estimator.advantages(group_ids=[0, 0], segment_ids=SEGMENTS, rewards={"score": [1.0, 0.0]})
    assert torch.equal(default, (SEGMENTS > 0).float())

    from slca_grpo.cli import main

    assert main(["estimators"]) == 0
    assert "[settings: rl.advantage.constant-probe.value]" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("rl.advantage.constant-bad.valu=1", "--set rl.advantage.constant-bad.valu: unknown setting 'valu'"),
        ("rl.advantage.constant-bad.value=-1", "rl.advantage.constant-bad.value must be > 0, got -1.0"),
        ("rl.advantage.constant-bad.value=x", "rl.advantage.constant-bad.value: expected a number, got 'x'"),
    ],
)
def test_a_bad_key_of_an_estimators_settings_is_one_line_naming_it(plugin_file, tmp_path, override, message):
    path = plugin_file(ESTIMATOR_PLUGIN, "constant-bad")
    preset = resolve_config_path("demo-quick-tiny")
    with pytest.raises(ConfigError) as info:
        load_yaml_config(RunConfig, preset, [f"train.plugins=[{path}]", override])
    assert message in str(info.value) and "\n" not in str(info.value)
    yaml_file = tmp_path / "typo.yaml"
    yaml_file.write_text(f"train:\n  plugins: [{path}]\nrl:\n  advantage:\n    constant-bad:\n      valu: 1\n")
    with pytest.raises(ConfigError, match=r"unknown setting\(s\): rl\.advantage\.constant-bad\.valu \(known: value\)"):
        load_yaml_config(RunConfig, yaml_file)


def test_our_trainer_and_the_verl_adapter_call_one_estimator_object_with_its_settings(plugin_file):
    from slca_grpo.trainer.rl import RLConfig, RLTrainer

    load_plugin(str(plugin_file(ESTIMATOR_PLUGIN, "constant-both")))
    advantage = from_dict(AdvantageConfig, {"constant-both": {"value": 0.5}}, prefix="rl.advantage.")
    task, tokenizer, formatter, environment, scripts = two_step_setup()
    loop = scripted_loop(tokenizer, formatter, environment, scripts["step 2 wrong"], group_size=2)
    config = RLConfig(
        estimator="constant-both", steps=1, prompts_per_step=1, mini_batch_prompts=1, kl_coef=0.0, advantage=advantage
    )
    trainer = RLTrainer(loop.model, None, loop, RuleJudge(), RewardConfig(), config)
    assert trainer.estimator is estimator_spec("constant-both")  # looked up once, at build
    metrics, _ = trainer.step([task], 0)
    assert metrics["adv/tool_mean"] == 0.5 and metrics["adv/summary_mean"] == 0.5

    # verl: the slca section reads the same settings, and batch_advantages calls the same object.
    section = read_section({"slca": {"advantage": {"constant-both": {"value": 0.5}}}})
    mask = torch.tensor([[1, 1, 0, 1], [1, 0, 1, 1]])
    infos = [{"score": 1.0, "answered": True}, {"score": 0.0, "answered": False}]
    advantages, segments = batch_advantages(
        trainer.estimator, group_ids=["u", "u"], response_mask=mask, reward_infos=infos, rollouts=["a", "b"],
        config=section.advantage,
    )  # fmt: skip
    assert torch.equal(advantages, 0.5 * mask.float())
    with pytest.raises(ConfigError, match="slca.advantage.constant-both.value must be > 0"):
        read_section({"slca": {"advantage": {"constant-both": {"value": 0}}}})


def test_a_reward_with_its_own_setting_is_one_file(plugin_file, tmp_path):
    path = plugin_file(REWARD_PLUGIN, "brief-probe")
    preset = resolve_config_path("demo-quick-tiny")
    config = load_yaml_config(RunConfig, preset, [f"train.plugins=[{path}]", "reward.brief-probe.max_words=5"])
    assert config.reward.settings["brief-probe"].max_words == 5
    assert to_dict(config.reward)["brief-probe"] == {"max_words": 5}
    strict = compute_rewards(TEXTS, [TASK] * 3, None, config.reward, names=["brief-probe"])
    loose = compute_rewards(TEXTS, [TASK] * 3, None, RewardConfig(), names=["brief-probe"])
    assert strict.as_dict()["brief-probe"] == [0.0, 0.0, 1.0]  # answers of 7, 7 and 5 words
    assert loose.as_dict()["brief-probe"] == [1.0, 1.0, 1.0]  # the default: 40 words
    with pytest.raises(ConfigError, match=r"reward\.brief-probe\.max_words: expected an integer, got 1\.5"):
        load_yaml_config(RunConfig, preset, [f"train.plugins=[{path}]", "reward.brief-probe.max_words=1.5"])
    # On verl the reward function reads the same key from slca.reward.
    on_verl = read_section({"slca": {"reward": {"brief-probe": {"max_words": 5}}}})
    assert on_verl.reward.settings == config.reward.settings


EXAMPLE_SCRIPT = """
import json, sys
import torch
from slca_grpo.algos import estimator_spec
from slca_grpo.config import load_yaml_config
from slca_grpo.data.synthetic import generate_tasks
from slca_grpo.presets import resolve_config_path
from slca_grpo.rewards import compute_rewards
from slca_grpo.trainer.run_config import RunConfig

examples = sys.argv[1]
task = generate_tasks(0, 1, "train")[0]
for extra in json.loads(sys.argv[2]):  # one line of results per list of overrides, in order
    overrides = [f"train.plugins=[{examples}/clipped_grpo.py, {examples}/brief_answers.py]", *extra]
    config = load_yaml_config(RunConfig, resolve_config_path("demo-quick-tiny"), overrides)
    segments = torch.tensor([[1, 2], [1, 2]])
    advantages = estimator_spec("clipped_grpo").advantages(
        group_ids=[0, 0], segment_ids=segments, rewards={"score": [1.0, 0.0]}, config=config.rl.advantage
    )
    brief = compute_rewards(["six words in this final answer"], [task], None, config.reward, names=["brief_answer"])
    print(json.dumps({"advantages": advantages.tolist(), "brief": brief.as_dict()["brief_answer"]}))
"""


def test_the_shipped_examples_with_settings_run_as_documented():
    """examples/plugins/clipped_grpo.py and brief_answers.py, in a fresh process so that their
    names stay out of this one."""
    examples = Path(__file__).resolve().parents[1] / "examples" / "plugins"

    def run(*runs):  # each run's config read from its own overrides, in one process (one import)
        done = subprocess.run(
            [sys.executable, "-c", EXAMPLE_SCRIPT, str(examples), json.dumps(runs)], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return [json.loads(line) for line in done.stdout.splitlines()]

    default, tuned = run([], ["rl.advantage.clipped_grpo.clip=0.5", "reward.brief_answer.max_words=5"])
    # default: clip 2 cuts nothing here; 40 words
    assert default["brief"] == [1.0] and default["advantages"][0] == pytest.approx([0.7071, 0.7071], abs=1e-4)
    assert tuned == {"advantages": [[0.5, 0.5], [-0.5, -0.5]], "brief": [0.8]}


def test_a_batched_function_reward_sees_the_whole_batch():
    @dataclass(frozen=True)
    class Offset:
        offset: float = 0.0

    seen = []

    @register_reward("calls-over-batch", batched=True, settings=Offset)
    def calls_over_batch(parsed, tasks, config, settings):
        """Each rollout's calls minus the batch's mean, plus the offset."""
        seen.append((len(parsed), len(tasks)))
        counts = [len(p.calls) for p in parsed]
        return [count - sum(counts) / len(counts) + settings.offset for count in counts]

    @register_reward("wrong-length", batched=True)
    def wrong_length(parsed, tasks, config):
        return [1.0]

    try:
        config = from_dict(RewardConfig, {"calls-over-batch": {"offset": 1.0}})
        batch = compute_rewards(TEXTS, [TASK] * 3, None, config, names=["calls-over-batch"])
        assert seen == [(3, 3)]  # one call for the batch, not one per rollout
        assert batch.as_dict()["calls-over-batch"] == [1.0, 2.0, 0.0]
        with pytest.raises(ValueError, match="batched reward 'wrong-length' returned 1 values for 3 rollouts"):
            compute_rewards(TEXTS, [TASK] * 3, None, names=["wrong-length"])
    finally:
        unregister_reward_family("calls-over-batch")
        unregister_reward_family("wrong-length")


def test_an_estimator_may_bring_its_own_segment_layout():
    def last_call_only(response_mask, answered):
        """The role layout, with every tool run but the last one left out (code 0)."""
        roles = segments_from_mask(response_mask, answered)
        tool = roles == SEG_TOOL
        last_tool_start = torch.where(tool, torch.arange(roles.shape[1]), -1).amax(dim=1, keepdim=True)
        runs = torch.cumsum((tool & ~torch.nn.functional.pad(tool, (1, 0))[:, :-1]).long(), dim=1)
        last_run = torch.gather(runs, 1, last_tool_start.clamp(min=0))
        return torch.where(tool & (runs != last_run), 0, roles)

    @register_estimator("last-call-grpo", rewards=("score",), segmentation=last_call_only)
    def last_call_grpo(group_index, segment_ids, rewards, config):
        """GRPO on the last call's tokens and the summary."""
        advantage = rewards["score"].double() - rewards["score"].double().mean()
        return route_by_segment(segment_ids, advantage, advantage)

    try:
        estimator = estimator_spec("last-call-grpo")
        mask = torch.tensor([[1, 0, 1, 1, 0, 1], [1, 1, 0, 1, 0, 0]])
        segments = estimator.segment_ids(mask, [True, False])
        assert segments.tolist() == [[0, 0, 1, 1, 0, 2], [0, 0, 0, 1, 0, 0]]
        infos = [{"score": 1.0, "answered": True}, {"score": 0.0, "answered": False}]
        advantages, verl_segments = batch_advantages(
            estimator, group_ids=["u", "u"], response_mask=mask, reward_infos=infos, rollouts=["a", "b"]
        )
        assert torch.equal(verl_segments, segments)
        assert advantages.tolist() == [[0, 0, 0.5, 0.5, 0, 0.5], [0, 0, 0, -0.5, 0, 0]]
        assert estimator.layout_name == "last_call_only"
    finally:
        unregister_estimator("last-call-grpo")


def test_a_plugin_estimator_named_like_one_of_verls_is_an_error():
    @register_estimator("gae", rewards=("score",))
    def gae(group_index, segment_ids, rewards, config):
        """A plugin's estimator that verl would silently replace by its own GAE."""
        return segment_ids.float()

    try:
        with pytest.raises(ConfigError) as info:
            check_no_clash_with_verl({"gae", "grpo", "rloo"})
        assert "estimator 'gae' of the plugin" in str(info.value) and "\n" not in str(info.value)
    finally:
        unregister_estimator("gae")
    check_no_clash_with_verl({"gae", "grpo", "rloo"})  # our built-in grpo stays verl's on verl, as documented


def test_every_registry_follows_one_rule_for_names():
    for registry, entry in [
        (ESTIMATORS, estimator_spec("grpo")),
        (REWARD_FAMILIES, REWARD_FAMILIES.get("hierr")),
        (SIMULATOR_BACKENDS, SIMULATOR_BACKENDS.get("schema")),
        (COMMANDS, (lambda subparsers: None, None)),
    ]:
        registry.add("rule-probe", entry, origin="tests")
        try:
            with pytest.raises(ValueError, match=f"{registry.kind} 'rule-probe' is already registered \\(by tests\\)"):
                registry.add("rule-probe", entry)
            registry.add("rule-probe", entry, origin="tests.other", replace=True)
            assert registry.origin("rule-probe") == "tests.other" and not registry.is_builtin("rule-probe")
        finally:
            registry.remove("rule-probe")
        with pytest.raises(KeyError, match=f"unknown {registry.kind} 'rule-probe'"):
            registry.get("rule-probe")
    assert ESTIMATORS.is_builtin("slca") and SIMULATOR_BACKENDS.is_builtin("schema")


def test_settings_must_be_a_dataclass_of_defaults_under_a_key_of_their_own():
    @dataclass
    class NoDefault:
        clip: float

    @dataclass
    class Fine:
        clip: float = 1.0

    with pytest.raises(TypeError, match="need a default for every field"):
        register_estimator("needs-clip", settings=NoDefault)
    with pytest.raises(TypeError, match="must be a dataclass"):
        register_estimator("not-a-dataclass", settings=dict)
    with pytest.raises(ValueError, match="may not be one of eps, lambda_summary"):
        register_estimator("eps", settings=Fine)
    with pytest.raises(ValueError, match="may not be one of api_key_env"):
        register_reward("weights", settings=Fine)(lambda parsed, task, config, settings: 0.0)


def test_rewards_compute_without_importing_the_estimators():
    code = "import sys, slca_grpo.rewards; sys.exit('slca_grpo.algos' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0
