"""Rollouts and SFT through models' own chat templates (``chat_format: native``)."""

import copy
import json
from types import SimpleNamespace

import pytest
from chat_templates import (
    CHATML_BLOCKS,
    CHATML_PYTHONIC,
    COUNTS_MESSAGES,
    HEADER_JSON,
    HEADER_JSON_SPECIALS,
    IGNORES_TOOLS,
    MISTRAL_LIKE,
    MISTRAL_SPECIALS,
    NO_END_TOKEN,
)
from scripted import ScriptedLM
from smoke_run import smoke_config

from slca_grpo.chat import BlockStatus, parse_tool_calls
from slca_grpo.chat.chat_format import build_formatter, install_chat_template, resolve_chat_format
from slca_grpo.chat.formatter import ChatFormatter
from slca_grpo.chat.jinja import hermes_chat_template
from slca_grpo.chat.native_format import ChatTemplateError, NativeFormatter
from slca_grpo.data.synthetic import generate_suite
from slca_grpo.datatypes import ToolCall
from slca_grpo.engine.sampling import STOP_EOS, STOP_LENGTH, Generation
from slca_grpo.eval.agent import AgentRequest
from slca_grpo.eval.hf_agent import HFChatAgent
from slca_grpo.models import synthetic_corpus
from slca_grpo.models.tokenizer import train_tokenizer
from slca_grpo.rewards.batch import compute_rewards
from slca_grpo.rewards.rule_judge import RuleJudge
from slca_grpo.rollout.environment import ToolEnvironment
from slca_grpo.rollout.loop import AgentLoop, RolloutConfig
from slca_grpo.trainer.sft import build_example

# style: (template, special tokens to add, expected tool parser, calls per turn, end-of-turn token)
STYLES = {
    "chatml_blocks": (CHATML_BLOCKS, [], "hermes", None, "<|im_end|>"),
    "header_json": (HEADER_JSON, HEADER_JSON_SPECIALS, "llama3_json", 1, "<|eot_id|>"),
    "mistral": (MISTRAL_LIKE, MISTRAL_SPECIALS, "mistral", None, "</s>"),
    "pythonic": (CHATML_PYTHONIC, [], "pythonic", None, "<|im_end|>"),
}


@pytest.fixture(scope="module")
def base_tokenizer():
    return train_tokenizer(synthetic_corpus(60), vocab_size=1200)


def tokenizer_with(base, template, specials=()):
    tokenizer = copy.deepcopy(base)
    if specials:
        tokenizer.add_special_tokens({"additional_special_tokens": list(specials)})
    tokenizer.chat_template = template
    return tokenizer


@pytest.fixture(scope="module")
def formatters(base_tokenizer):
    return {name: build_formatter(tokenizer_with(base_tokenizer, t, s)) for name, (t, s, *_) in STYLES.items()}


@pytest.fixture(scope="module")
def tasks():
    """A task of every kind of the synthetic suite (with fixtures and a reference answer)."""
    chosen = {}
    for task in generate_suite(seed=3, n_train=120, n_test=0).train:
        chosen.setdefault(task.metadata["kind"], task)
    assert set(chosen) == {"single", "distractor", "parallel", "two_step", "irrelevant"}
    return chosen


class ReplayLM(ScriptedLM):
    """Puts all probability on the next token of whichever given sequence the context begins."""

    def __init__(self, tokenizer, sequences):
        super().__init__(tokenizer, lambda prompt, turn: "")
        self.sequences = [list(s) for s in sequences]

    def next_token(self, ids):
        for sequence in self.sequences:
            if len(sequence) > len(ids) and sequence[: len(ids)] == ids:
                return sequence[len(ids)]
        return self.tokenizer.eos_token_id


class NoSimulator:
    def simulate_many(self, requests):
        raise AssertionError(f"the gold calls have fixtures; the simulator was asked for {requests}")


def replay(formatter, task, example, **overrides):
    settings = {"group_size": 1, "max_turns": 8, "max_response_tokens": 4096, **overrides}
    loop = AgentLoop(
        ReplayLM(formatter.tokenizer, [example.input_ids]),
        formatter,
        ToolEnvironment(NoSimulator()),
        RolloutConfig(**settings),
    )
    return loop.run([task], session_prefix="replay")[0]


@pytest.mark.parametrize("style", sorted(STYLES))
def test_the_probe_finds_each_templates_syntax_turn_end_and_parallel_support(formatters, style):
    formatter = formatters[style]
    _, _, parser, calls_per_turn, end = STYLES[style]
    assert isinstance(formatter, NativeFormatter)
    assert (formatter.tool_parser, formatter.max_calls_per_turn) == (parser, calls_per_turn)
    end_id = formatter.tokenizer.convert_tokens_to_ids(end)
    assert formatter.end_of_turn_id == end_id and end_id in formatter.stop_token_ids
    assert formatter.stop_strings == ()


def test_auto_keeps_the_hermes_format_for_the_built_in_template_and_no_template(base_tokenizer):
    assert base_tokenizer.chat_template == hermes_chat_template()
    assert type(build_formatter(base_tokenizer)) is ChatFormatter
    bare = tokenizer_with(base_tokenizer, None)
    assert type(build_formatter(bare)) is ChatFormatter
    with pytest.raises(ChatTemplateError, match="no chat template"):
        build_formatter(bare, chat_format="native")
    chatml = tokenizer_with(base_tokenizer, CHATML_BLOCKS)
    assert type(build_formatter(chatml, chat_format="hermes")) is ChatFormatter


def test_training_and_evaluation_choose_the_format_and_template_alike(base_tokenizer):
    chatml = tokenizer_with(base_tokenizer, CHATML_BLOCKS)
    assert [resolve_chat_format(t) for t in (base_tokenizer, chatml)] == ["hermes", "native"]
    assert resolve_chat_format(chatml, "hermes") == "hermes"
    # A template given to the evaluation agent replaces the tokenizer's own, as model.chat_template does.
    llama_like = tokenizer_with(base_tokenizer, CHATML_BLOCKS, HEADER_JSON_SPECIALS)
    agent = HFChatAgent(ScriptedLM(llama_like, lambda prompt, turn: ""), llama_like, chat_template=HEADER_JSON)
    assert llama_like.chat_template == HEADER_JSON and agent.formatter.tool_parser == "llama3_json"
    install_chat_template(chatml, chat_format="hermes")  # what a run with chat_format: hermes saves
    assert chatml.chat_template == hermes_chat_template() and resolve_chat_format(chatml) == "hermes"
    with pytest.raises(ValueError, match="native-format setting"):
        install_chat_template(chatml, chat_format="hermes", chat_template=HEADER_JSON)


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        (IGNORES_TOOLS, "does not show the tools"),
        (COUNTS_MESSAGES, "changes how the template renders"),
        (NO_END_TOKEN, "without a special token"),
    ],
    ids=["ignores-tools", "counts-messages", "no-end-token"],
)
def test_templates_that_cannot_be_used_are_refused_with_the_reason(base_tokenizer, template, problem):
    with pytest.raises(ChatTemplateError, match=problem) as caught:
        build_formatter(tokenizer_with(base_tokenizer, template))
    assert "\n" not in str(caught.value)


def test_a_forced_tool_parser_that_cannot_read_the_template_is_refused(base_tokenizer):
    tokenizer = tokenizer_with(base_tokenizer, HEADER_JSON, HEADER_JSON_SPECIALS)
    with pytest.raises(ChatTemplateError, match="tool_parser hermes reads"):
        build_formatter(tokenizer, tool_parser="hermes")
    assert build_formatter(tokenizer, tool_parser="llama3_json").tool_parser == "llama3_json"


@pytest.mark.parametrize("style", sorted(STYLES))
@pytest.mark.parametrize("kind", ["single", "parallel", "two_step", "irrelevant"])
def test_a_rollout_that_samples_the_sft_target_reproduces_it_token_for_token(formatters, tasks, style, kind):
    formatter, task = formatters[style], tasks[kind]
    example = build_example(task, formatter)
    trajectory = replay(formatter, task, example)
    prompt = len(trajectory.prompt_ids)
    assert trajectory.prompt_ids + trajectory.response_ids == example.input_ids
    assert trajectory.response_mask == example.loss_mask[prompt:] and not any(example.loss_mask[:prompt])
    assert not trajectory.truncated
    steps = formatter.call_turns
    assert [turn.calls for turn in trajectory.turns[:-1]] == [c for step in task.gold_calls for c in steps(step)]
    assert trajectory.final_text == task.reference_answer.strip()


@pytest.mark.parametrize("style", sorted(STYLES))
@pytest.mark.parametrize("kind", ["single", "distractor", "parallel", "two_step", "irrelevant"])
def test_rewards_read_native_rollouts_as_they_read_hermes_ones(base_tokenizer, formatters, tasks, style, kind):
    task = tasks[kind]
    hermes = ChatFormatter(base_tokenizer)
    reference = replay(hermes, task, build_example(task, hermes))
    native = replay(formatters[style], task, build_example(task, formatters[style]))
    batch = compute_rewards([reference.response_text, native.response_text], [task, task], RuleJudge()).as_dict()
    if formatters[style].max_calls_per_turn == 1 and kind == "parallel":
        # One call per turn: the first block cannot hold the whole parallel step.
        assert batch["tool"][1] < batch["tool"][0] and batch["summary"][1] == pytest.approx(batch["summary"][0])
    else:
        for name, values in batch.items():
            assert values[1] == pytest.approx(values[0]), name


def test_a_malformed_native_call_gets_an_error_result_rendered_by_the_template(formatters, tasks):
    formatter, task = formatters["header_json"], tasks["single"]
    prompt = formatter.dialogue(task).prompt_ids
    broken = formatter.encode('{"name": "' + task.gold_calls[0][0].name + '", "parameters": {') + [
        formatter.end_of_turn_id
    ]
    trajectory = replay(formatter, task, SimpleNamespace(input_ids=prompt + broken), max_turns=2)
    first = trajectory.turns[0]
    assert first.calls == [] and [o.error.kind for o in first.observations] == ["invalid_tool_call/bad_json"]
    injected = formatter.decode(trajectory.response_ids[len(broken) :])
    assert injected.startswith("<|start_header_id|>ipython<|end_header_id|>\n\n") and "invalid JSON" in injected
    assert parse_tool_calls(trajectory.response_text).blocks[0].status is BlockStatus.BAD_JSON


def test_several_blocks_in_one_native_turn_are_one_parallel_step(formatters):
    formatter = formatters["chatml_blocks"]
    calls = [ToolCall("get_weather", {"city": "Oslo"}), ToolCall("get_time", {"zone": "CET"})]
    text = "".join(f'\n<tool_call>\n{{"name": "{c.name}", "arguments": {c.arguments}}}\n</tool_call>' for c in calls)
    text = text.replace("'", '"')
    ids = formatter.encode("Checking both." + text) + [formatter.end_of_turn_id]
    reading = formatter.read_turn(Generation(ids, [0.0] * len(ids), STOP_EOS), ["get_weather", "get_time"])
    assert reading.calls_tools and list(reading.block.calls) == calls
    parsed = parse_tool_calls(reading.text)
    assert len(parsed.blocks) == 1 and parsed.calls == calls and parsed.text.startswith("Checking both.")
    unknown = formatter.read_turn(Generation(ids, [0.0] * len(ids), STOP_EOS), ["get_weather"])
    assert unknown.block.status is BlockStatus.UNKNOWN_TOOL and list(unknown.block.calls) == calls
    cut = formatter.read_turn(Generation(ids[:-1], [0.0] * (len(ids) - 1), STOP_LENGTH), ["get_weather"])
    assert not cut.calls_tools  # a turn the budget cut off asks for nothing


def test_long_tool_results_are_cut_in_the_middle_inside_the_template(formatters, tasks):
    formatter = formatters["mistral"]
    dialogue = formatter.dialogue(tasks["single"])
    long = '{"log": "' + "event " * 400 + '"}'
    formatter.max_tool_response_tokens = 40
    try:
        ids, text = formatter.turn_results(dialogue, list(tasks["single"].gold_calls[0]), [long])
    finally:
        formatter.max_tool_response_tokens = 2048
    shown = formatter.decode(ids)
    assert "...[truncated]..." in shown and len(ids) < 120
    assert shown.startswith("[TOOL_RESULTS]") and dialogue.turns == 1
    assert "<tool_response>" in text and "...[truncated]..." in text


def test_the_hf_agent_renders_history_through_the_template_and_answers_in_the_hermes_view(formatters, tasks):
    formatter = formatters["header_json"]
    task = tasks["single"]
    call = task.gold_calls[0][0]
    written = '{"name": "' + call.name + '", "parameters": ' + json.dumps(call.arguments) + "}<|eot_id|>"
    model = ScriptedLM(formatter.tokenizer, lambda prompt, turn: "")
    seen = []
    model.next_token = lambda ids: _script_after_prompt(formatter, ids, written, seen)
    agent = HFChatAgent(model, formatter.tokenizer, max_new_tokens=200)
    assert isinstance(agent.formatter, NativeFormatter)
    history = [
        *task.messages,
        {"role": "assistant", "content": '<tool_call>\n{"name": "x_tool", "arguments": {"a": 1}}\n</tool_call>'},
        {"role": "tool", "content": '{"ok": true}'},
    ]
    answer = agent.respond([AgentRequest(messages=history, tools=task.tools)])[0]
    assert parse_tool_calls(answer).calls == [call]
    prompt = formatter.decode(seen[0])
    assert '{"name": "x_tool", "parameters": {"a": 1}}<|eot_id|>' in prompt  # the history, rendered natively
    assert "<|start_header_id|>ipython<|end_header_id|>\n\n" in prompt and "<tool_call>" not in prompt


def _script_after_prompt(formatter, ids, text, seen):
    """Write ``text`` after the first context seen (the prompt)."""
    if not seen:
        seen.append(list(ids))
    target = formatter.encode(text)
    written = len(ids) - len(seen[0])
    return target[written] if 0 <= written < len(target) else formatter.tokenizer.eos_token_id


def test_chat_format_settings_are_checked_when_the_config_loads(tmp_path):
    from slca_grpo.config import ConfigError, apply_overrides
    from slca_grpo.trainer.run import RunConfig

    for override, problem in [
        ("model.chat_format=xml", "model.chat_format must be one of auto, hermes, native"),
        ("model.tool_parser=xml", "model.tool_parser must be one of auto, hermes, llama3_json"),
    ]:
        with pytest.raises(ConfigError, match=problem):
            apply_overrides(RunConfig(), [override])
    with pytest.raises(ConfigError, match="chat_template is a native-format setting"):
        apply_overrides(RunConfig(), ["model.chat_format=hermes", f"model.chat_template={tmp_path / 't.jinja'}"])


def test_slca_train_names_the_setting_when_a_template_cannot_be_used(tmp_path, capsys):
    from slca_grpo.cli import main

    unusable = tmp_path / "plain.jinja"
    unusable.write_text(IGNORES_TOOLS)
    common = ["--set", f"train.out_dir={tmp_path / 'run'}", "--set", "data.n_train=20", "--set", "sft.steps=1"]
    assert (
        main(["train", "demo-quick-tiny", "--set", f"model.chat_template={tmp_path / 'missing.jinja'}", *common]) == 2
    )
    assert "model.chat_template: cannot read" in capsys.readouterr().err
    empty = tmp_path / "empty.jinja"
    empty.write_text("\n")
    assert main(["train", "demo-quick-tiny", "--set", f"model.chat_template={empty}", *common]) == 2
    assert f"model.chat_template: {empty} is empty" in capsys.readouterr().err
    assert main(["train", "demo-quick-tiny", "--set", f"model.chat_template={unusable}", *common]) == 2
    err = capsys.readouterr().err
    assert "model.chat_format: tiny: the chat template does not show the tools" in err and "Traceback" not in err


def test_slca_eval_takes_a_chat_template_file_as_a_run_does(tmp_path, capsys):
    from slca_grpo.cli import main

    command = ["eval", "indomain", "--policy", "reader", "--tasks", "synthetic", "--limit", "1"]
    command += ["--out", str(tmp_path / "eval")]
    assert main([*command, "--chat-template", str(tmp_path / "missing.jinja")]) == 2
    assert "--chat-template: cannot read" in capsys.readouterr().err  # before the model loads
    empty = tmp_path / "empty.jinja"
    empty.write_text("\n")
    assert main([*command, "--chat-template", str(empty)]) == 2
    assert f"--chat-template: {empty} is empty" in capsys.readouterr().err
    assert main([*command, "--chat-format", "hermes", "--chat-template", str(empty)]) == 2
    assert "cannot be used with --chat-format hermes" in capsys.readouterr().err


@pytest.mark.slow
def test_a_run_trains_and_evaluates_through_a_native_template_file(tmp_path):
    from chat_templates import CHATML_JSON

    from slca_grpo.models import load_tokenizer
    from slca_grpo.trainer.run import train

    template = tmp_path / "chatml_json.jinja"
    template.write_text(CHATML_JSON)
    out = tmp_path / "run"
    summary = train(smoke_config(out, **{"model.chat_template": str(template)}), echo=False)
    saved = load_tokenizer(out / "sft")
    assert saved.chat_template == CHATML_JSON  # the checkpoint carries the format it was trained in
    formatter = build_formatter(saved)
    assert (formatter.tool_parser, formatter.max_calls_per_turn) == ("llama3_json", 1)
    assert summary["steps"] == 3 and [e["step"] for e in summary["evals"]] == [-1, 1, 2]


@pytest.mark.parametrize("style", ["hermes", *sorted(STYLES)])
def test_text_said_alongside_a_call_is_learned_and_replayed_exactly(base_tokenizer, formatters, tasks, style):
    formatter = ChatFormatter(base_tokenizer) if style == "hermes" else formatters[style]
    task = copy.deepcopy(tasks["two_step"])
    task.metadata["step_texts"] = ["Let me look that up first.", ""]
    example = build_example(task, formatter)
    learned = formatter.decode([i for i, m in zip(example.input_ids, example.loss_mask) if m])
    renders_text = style in ("hermes", "chatml_blocks", "pythonic")  # the others drop it, as Llama's and Mistral's do
    assert learned.count("Let me look that up first.") == int(renders_text)
    trajectory = replay(formatter, task, example)
    assert trajectory.prompt_ids + trajectory.response_ids == example.input_ids
    assert trajectory.turns[0].text.startswith("Let me look that up first.") == renders_text
    assert [t.calls for t in trajectory.turns[:-1]] == task.gold_calls
