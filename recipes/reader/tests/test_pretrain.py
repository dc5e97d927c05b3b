"""``python -m recipes.reader.pretrain``: the loop packs each document once, resumes exactly, and
measures copying."""

from __future__ import annotations

import argparse
import json
import logging
import random
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from transformers.utils import logging as hf_logging

import recipes.reader.pretrain as pretrain_module
import recipes.reader.probes as probes_module
from recipes.reader.corpus import DRILLS, CorpusConfig, document
from recipes.reader.pretrain import (
    RETIRED_CORPUS_SETTINGS,
    DocumentStream,
    PretrainConfig,
    learning_rate,
    main,
    pretrain,
    resume_command,
    row_shape,
    same_build,
)
from recipes.reader.probes import (
    called_name_tokens,
    copy_positions,
    drill_accuracy,
    encode,
    offered_names,
    probe,
    prompt_as_trained,
)
from slca_grpo.chat.template import render_chat
from slca_grpo.config import ConfigError
from slca_grpo.models import load_model, save_model
from slca_grpo.models.checkpoint import save_checkpoint
from slca_grpo.models.tiny import TinyModelConfig
from slca_grpo.models.tokenizer import train_tokenizer
from slca_grpo.trainer.run_folder import RunFolderBusy, RunFolderTaken, hold_run_folder

ROOT = Path(__file__).resolve().parents[3]


def copied_positions(tokenizer: Any, text: str) -> tuple[list[int], list[int], list[int]]:
    """Token ids of ``text``, the positions of assistant tokens, and of those a model must copy."""
    ids, offsets = encode(tokenizer, text)
    return (ids, *copy_positions(ids, offsets, text))


def name_positions(tokenizer: Any, text: str) -> list[int]:
    """Positions of the tokens that spell a called tool's name in the assistant's turns."""
    return [p for spelled, _ in called_name_tokens(encode(tokenizer, text)[1], text) for p in spelled]


def name_choice_positions(tokenizer: Any, text: str) -> list[int]:
    """Position of each called name's choosing token (``called_name_tokens``)."""
    return [choice for _, choice in called_name_tokens(encode(tokenizer, text)[1], text) if choice is not None]


SMALL = PretrainConfig(
    steps=4,
    rows_per_step=2,
    seq_len=160,
    vocab_size=400,
    tokenizer_docs=20,
    model=TinyModelConfig(num_layers=1, hidden_size=32, num_heads=2, num_kv_heads=1, intermediate_size=64),
    probe_docs=2,
    probe_every=2,
    save_every=2,
    warmup_steps=1,
    corpus=CorpusConfig(warmup_docs=10),
    short_seq_steps=0,
    task_eval_every=0,
    probe_heldout_docs=2,
)


class NumberingTokenizer:
    """Each document becomes tokens naming its index, so a test can see which ones were packed."""

    eos_token_id = pad_token_id = 0

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def __call__(self, text: str, add_special_tokens: bool = False, verbose: bool = True) -> dict[str, list[int]]:
        number = self.seen.setdefault(text, len(self.seen) + 1)
        return {"input_ids": [number] * (5 + number % 7)}


def test_rows_pack_every_document_once_in_order_and_cut_none_that_fits() -> None:
    stream = DocumentStream(NumberingTokenizer(), CorpusConfig(), start=0)
    packed: list[int] = []
    for _ in range(3):
        ids, labels = stream.rows(3, 40)
        for row, row_labels in zip(ids.tolist(), labels.tolist()):
            kept = [t for t, label in zip(row, row_labels) if label != -100 and t != 0]
            packed += list(dict.fromkeys(kept))
    assert packed == list(range(1, len(packed) + 1))
    assert stream.position == len(packed)


def test_a_document_longer_than_the_model_is_packed_and_probed_without_a_false_indexing_warning() -> None:
    _, tokenizer = load_model("reader")
    tokenizer.model_max_length = 16  # every corpus document is longer than this
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    hf_logger = hf_logging.get_logger("transformers")
    hf_logger.addHandler(handler)
    try:
        stream = DocumentStream(tokenizer, CorpusConfig(), start=0)
        ids, labels = stream.rows(2, 16)
        _, text = document(0, CorpusConfig())  # the probe set's positions are found on whole documents
        copied_positions(tokenizer, text), name_positions(tokenizer, text)
        warned_by_the_build = [r.getMessage() for r in records]
        tokenizer("word " * 40, add_special_tokens=False)  # a plain call does warn: the capture works
    finally:
        hf_logger.removeHandler(handler)
    assert ids.shape == (2, 16) and bool((labels != -100).all())
    assert not any("longer than the specified maximum" in message for message in warned_by_the_build)
    assert any("longer than the specified maximum" in r.getMessage() for r in records)


def test_a_length_curriculum_packs_shorter_rows_first_with_the_same_tokens_a_step() -> None:
    config = replace(SMALL, steps=10, short_seq_len=40, short_seq_steps=3)
    assert [row_shape(config, step) for step in (0, 2, 3, 9)] == [(8, 40), (8, 40), (2, 160), (2, 160)]
    assert row_shape(replace(SMALL, steps=10), 0) == (2, 160)  # none here
    assert row_shape(PretrainConfig(), 999) == (12, 1024) and row_shape(PretrainConfig(), 1000) == (6, 2048)
    with pytest.raises(ValueError, match="short_seq_len must be an int in"):
        replace(SMALL, short_seq_len=161, short_seq_steps=1)
    with pytest.raises(ValueError, match="short_seq_steps must be an int >= 0"):
        replace(SMALL, short_seq_steps=-1)


def test_a_checkpoint_that_records_the_retired_corpus_switches_continues_only_at_this_corpus() -> None:
    today = json.loads(json.dumps(SMALL.to_dict()))
    before = {**today, "corpus": {**today["corpus"], **RETIRED_CORPUS_SETTINGS}}  # written before the freeze
    assert same_build(today, SMALL) and same_build(before, SMALL)
    for key, other in (("near_misses", True), ("paraphrase", 0.0), ("task_returns", True), ("readable_names", False)):
        assert not same_build({**before, "corpus": {**before["corpus"], key: other}}, SMALL), key
    partial = {k: v for k, v in before["corpus"].items() if k not in ("near_misses", "paraphrase", "task_returns")}
    assert not same_build({**before, "corpus": partial}, SMALL)  # corpus v5 recorded only some of them


def test_learning_rate_warms_up_then_decays_to_its_floor() -> None:
    config = replace(SMALL, steps=100, warmup_steps=10, lr=1.0, min_lr_ratio=0.1)
    assert learning_rate(config, 0) == pytest.approx(0.1)
    assert learning_rate(config, 9) == pytest.approx(1.0)
    assert learning_rate(config, 10) == pytest.approx(1.0)
    assert learning_rate(config, 55) == pytest.approx(0.55)
    assert learning_rate(config, 100) == pytest.approx(0.1)


def test_copy_positions_are_assistant_tokens_seen_in_the_request_but_not_the_system_prompt() -> None:
    text = (
        "<|im_start|>system\nYou help with codes.<|im_end|>\n<|im_start|>user\nRepeat QX-7 please<|im_end|>\n"
        "<|im_start|>assistant\nQX-7 codes<|im_end|>\n"
    )
    tokenizer = train_tokenizer([text] * 4, vocab_size=300, pretokenizer="words")
    ids, assistant, copied = copied_positions(tokenizer, text)
    pieces = [tokenizer.decode([ids[p]]) for p in assistant]
    assert "".join(pieces).strip().startswith("QX-7")
    assert [tokenizer.decode([ids[p]]) for p in copied] == ["QX", "-", "7"]  # "codes" is in the system prompt


def test_the_words_pretokenizer_writes_a_value_the_same_in_a_request_and_in_a_call() -> None:
    corpus = ["Book Zorvath QX-1234 in Tulamo for me.", '{"city": "Tulamo", "id": "Zorvath QX-1234"}'] * 3
    tokenizer = train_tokenizer(corpus, vocab_size=300, pretokenizer="words")
    value = tokenizer("Zorvath QX-1234", add_special_tokens=False)["input_ids"]

    def contains(text: str) -> bool:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        return any(ids[i : i + len(value)] == value for i in range(len(ids)))

    assert contains("Book Zorvath QX-1234 today.") and contains('{"id": "Zorvath QX-1234"}')
    digits = tokenizer("QX-1234", add_special_tokens=False)["input_ids"][-4:]
    assert [tokenizer.decode([d]) for d in digits] == ["1", "2", "3", "4"]
    assert tokenizer.decode(tokenizer(corpus[1])["input_ids"]) == corpus[1]
    with pytest.raises(ValueError, match="unknown pretokenizer"):
        train_tokenizer(corpus, vocab_size=300, pretokenizer="bytes")


def _fill_corpus() -> list[str]:
    rng = random.Random(0)
    return [render_chat(DRILLS["fill"](rng), (), add_generation_prompt=False) for _ in range(40)]


def test_under_words_nl_a_generation_prompt_is_the_start_of_its_conversations_tokens() -> None:
    # "words" merges the template's last newline into a JSON answer's first token; "words-nl" never does.
    texts = _fill_corpus()
    for pretokenizer, merges in (("words", True), ("words-nl", False)):
        tokenizer = train_tokenizer(texts, vocab_size=400, pretokenizer=pretokenizer)
        exchange = DRILLS["fill"](random.Random(1))
        prompt = tokenizer(render_chat(exchange[:1], (), add_generation_prompt=True), add_special_tokens=False)
        whole = tokenizer(render_chat(exchange, (), add_generation_prompt=False), add_special_tokens=False)
        is_prefix = whole["input_ids"][: len(prompt["input_ids"])] == prompt["input_ids"]
        assert is_prefix is not merges, pretokenizer
        assert ("\n{" in tokenizer.get_vocab() or "Ċ{" in tokenizer.get_vocab()) is merges
        assert tokenizer.decode(whole["input_ids"]) == render_chat(exchange, (), add_generation_prompt=False)


def test_a_drill_is_prompted_as_the_corpus_tokenised_it() -> None:
    exchange = DRILLS["fill"](random.Random(1))
    generation_prompt = render_chat(exchange[:1], (), add_generation_prompt=True)
    merging = train_tokenizer(_fill_corpus(), vocab_size=400, pretokenizer="words")
    ids, rest = prompt_as_trained(merging, exchange)
    assert rest == "\n" and merging.decode(ids) + rest == generation_prompt
    apart = train_tokenizer(_fill_corpus(), vocab_size=400, pretokenizer="words-nl")
    ids, rest = prompt_as_trained(apart, exchange)
    assert rest == "" and ids == apart(generation_prompt, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("pretokenizer", ["words", "words-nl"])
def test_a_model_that_writes_what_the_corpus_taught_passes_every_drill(monkeypatch, pretokenizer) -> None:
    # The stand-in model writes each drill's answer exactly as the corpus tokenised it; under the
    # old prompt (a bare newline's continuation) its JSON answers could never be matched.
    rng = random.Random(0)
    texts = [render_chat(DRILLS[kind](rng), (), add_generation_prompt=False) for kind in DRILLS for _ in range(20)]
    tokenizer = train_tokenizer(texts, vocab_size=400, pretokenizer=pretokenizer)
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    taught: dict[tuple[int, ...], list[int]] = {}
    rng = random.Random(5)
    for build in DRILLS.values():
        for _ in range(6):
            exchange = build(rng)
            whole = tokenizer(render_chat(exchange, (), add_generation_prompt=False), add_special_tokens=False)
            prompt, _ = prompt_as_trained(tokenizer, exchange)
            answer = whole["input_ids"][len(prompt) :]
            taught[tuple(prompt)] = answer[: answer.index(end) + 1]

    def writes_what_it_was_taught(model, prompts, **kwargs):
        return [SimpleNamespace(token_ids=taught.get(tuple(p), [end])) for p in prompts]

    monkeypatch.setattr(probes_module, "sample", writes_what_it_was_taught)
    scores = drill_accuracy(torch.nn.Identity(), tokenizer, per_kind=6, seed=5)
    assert scores == {f"drill/{kind}": 1.0 for kind in DRILLS}


def test_a_build_split_in_two_is_the_build_that_ran_through(tmp_path) -> None:
    # The task evaluation measures only: it may change at a resume and leaves the weights alone.
    whole = pretrain(replace(SMALL, task_eval_every=4, task_eval_tasks=2), tmp_path / "whole", progress=False)
    assert pretrain(SMALL, tmp_path / "split", progress=False, stop_at=3) is None
    assert not (tmp_path / "split" / "model").exists()
    split = pretrain(SMALL, tmp_path / "split", progress=False, resume=True)
    model_a, tokenizer_a = load_model(whole)
    model_b, tokenizer_b = load_model(split)
    for (name, a), b in zip(model_a.state_dict().items(), model_b.state_dict().values()):
        assert torch.equal(a, b), name
    assert tokenizer_a.get_vocab() == tokenizer_b.get_vocab()
    lines = [(tmp_path / run / "metrics.jsonl").read_text().splitlines() for run in ("whole", "split")]
    assert [json.loads(x)["train/loss"] for x in lines[0]] == [json.loads(x)["train/loss"] for x in lines[1]]
    probes = [json.loads(x) for x in lines[0] if "probe/copy_acc" in x]
    assert [p["step"] for p in probes] == [2, 4]
    assert (tmp_path / "whole" / "curves.png").stat().st_size > 1000
    assert all(0.0 <= p[f"probe/{key}_acc"] <= 1.0 for p in probes for key in ("assistant", "copy", "name"))
    tasks = [json.loads(x) for x in lines[0] if "tasks/name_f1" in x]
    assert [t["step"] for t in tasks] == [4]
    for key in ("name_f1", "arg_match", "success@0.7", "unoffered_calls"):
        assert 0.0 <= tasks[0][f"tasks/{key}"] <= 1.0
    assert not [x for x in lines[1] if "tasks/" in x]
    # Greedy drills are measured with the tasks: teacher-forced accuracy alone passed builds that copied nothing.
    assert {key for key in tasks[0] if key.startswith("drill/")} == {f"drill/{kind}" for kind in DRILLS}
    assert all(0.0 <= tasks[0][f"drill/{kind}"] <= 1.0 for kind in DRILLS)


def test_a_build_may_continue_a_model_keeping_its_shape_tokenizer_and_weights(tmp_path) -> None:
    """``init``: the steps start from that model's weights, with its tokenizer and shape (not the
    config's), and a resume must name the same model."""
    start, start_tokenizer = load_model("tiny", seed=3)
    save_model(start, start_tokenizer, tmp_path / "start")
    config = replace(SMALL, init=str(tmp_path / "start"), steps=2, lr=1e-9, warmup_steps=0)
    built, tokenizer = load_model(pretrain(config, tmp_path / "build", progress=False))
    assert tokenizer.get_vocab() == start_tokenizer.get_vocab()
    before, after = start.state_dict(), built.state_dict()
    assert {k: v.shape for k, v in before.items()} == {k: v.shape for k, v in after.items()}
    assert sum(p.numel() for p in built.parameters()) != sum(
        p.numel() for p in load_model(pretrain(SMALL, tmp_path / "fresh", progress=False))[0].parameters()
    )
    for name, weight in before.items():  # an lr of 1e-9 moves nothing visibly: the steps began there
        torch.testing.assert_close(after[name], weight, atol=1e-6, rtol=0), name
    saved = json.loads((tmp_path / "build" / "pretrain_config.json").read_text())
    assert saved["init"] == str(tmp_path / "start")
    assert same_build(saved, config) and not same_build(saved, replace(config, init=""))


def test_name_positions_are_the_called_names_in_assistant_turns_only() -> None:
    tools = '{"name": "get_parcel"}'
    text = (
        f"<|im_start|>system\n<tools>{tools}</tools><|im_end|>\n<|im_start|>user\nparcel QX<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>\n{"name": "get_parcel", "arguments": {"name": "QX"}}\n</tool_call>'
        '<|im_end|>\n<|im_start|>assistant\nThe name: "QX"<|im_end|>\n'
    )
    tokenizer = train_tokenizer([text] * 4, vocab_size=300, pretokenizer="words")
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    positions = name_positions(tokenizer, text)
    assert "".join(tokenizer.decode([ids[p]]) for p in positions) == "get_parcel"
    assert positions[0] > len(tokenizer(text[: text.index("<|im_start|>assistant")])["input_ids"]) - 1


def _tool(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "description": name.replace("_", " "), "parameters": {}}}


def _called(names: list[str], offered: list[str]) -> str:
    calls = [{"role": "assistant", "content": "", "tool_calls": [{"name": n, "arguments": {}}]} for n in names]
    return render_chat([{"role": "user", "content": "please"}, *calls], [_tool(n) for n in offered])


def test_the_choosing_token_is_where_a_called_name_parts_from_every_other_offered_name() -> None:
    offered = ["get_stock_price", "get_recipe", "send_sms", "get_time", "get_time_zone"]
    text = _called(["get_stock_price", "send_sms", "get_time", "get_time_zone"], offered)
    assert offered_names(text) == offered
    tokenizer = train_tokenizer([text] * 4, vocab_size=300, pretokenizer="words")
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    chosen = name_choice_positions(tokenizer, text)
    # The first character each name does not share with another offered name: "s" of "stock"
    # (after "get_"), the very first of send_sms, and for get_time, a prefix of get_time_zone,
    # its closing quote (stopping is the choice).
    calls = [text.index('"name": "' + name + '"', text.index("<|im_start|>assistant")) + 9 for name in
             ("get_stock_price", "send_sms", "get_time", "get_time_zone")]  # fmt: skip
    departures = [calls[0] + 4, calls[1], calls[2] + len("get_time"), calls[3] + len("get_time")]
    assert len(chosen) == 4
    for position, char in zip(chosen, departures):
        begin, end = offsets[position]
        assert begin <= char < end, (tokenizer.decode([tokenizer(text)["input_ids"][position]]), text[char])


def test_one_offered_tool_is_chosen_at_its_names_first_token() -> None:
    text = _called(["lock_door"], ["lock_door"])
    tokenizer = train_tokenizer([text] * 4, vocab_size=300, pretokenizer="words")
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    (position,) = name_choice_positions(tokenizer, text)
    assert offsets[position][0] == text.index('"lock_door", "arguments"') + 1


class Oracle(torch.nn.Module):
    """Predicts each next token of known texts, except at positions it is told to miss."""

    def __init__(self, ids: list[int], vocab: int, miss: set[int]) -> None:
        super().__init__()
        self.ids, self.vocab, self.miss = ids, vocab, miss
        self.anchor = torch.nn.Parameter(torch.zeros(1))

    @property
    def device(self) -> torch.device:
        return self.anchor.device

    def forward(self, input_ids: torch.Tensor) -> SimpleNamespace:
        logits = torch.zeros(1, input_ids.shape[1], self.vocab)
        for position, token in enumerate(self.ids[1 : input_ids.shape[1]] + [0]):
            logits[0, position, (token + (position + 1 in self.miss)) % self.vocab] = 1.0
        return SimpleNamespace(logits=logits)


def test_the_probe_scores_the_choosing_token_under_its_prefix() -> None:
    text = _called(["get_stock_price"], ["get_stock_price", "get_recipe"])
    tokenizer = train_tokenizer([text] * 4, vocab_size=300, pretokenizer="words")
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    (choice,) = name_choice_positions(tokenizer, text)
    names = name_positions(tokenizer, text)
    right = probe(Oracle(ids, len(tokenizer), set()), tokenizer, [text], seq_len=len(ids), prefix="probe_heldout")
    assert set(right) == {f"probe_heldout/{k}" for k in ("loss", "assistant_acc", "copy_acc", "name_acc", "choice_acc")}
    assert right["probe_heldout/choice_acc"] == right["probe_heldout/name_acc"] == 1.0
    wrong = probe(Oracle(ids, len(tokenizer), {choice}), tokenizer, [text], seq_len=len(ids))
    assert wrong["probe/choice_acc"] == 0.0
    assert wrong["probe/name_acc"] == pytest.approx(1 - 1 / len(names))


def test_the_heldout_probe_is_the_suites_test_split_written_as_the_corpus_writes() -> None:
    from recipes.reader.corpus import heldout_task_document
    from slca_grpo.data.synthetic import DEFAULT_HELDOUT_TOOLS
    from slca_grpo.data.synthetic.catalogue import get_spec

    descriptions = {get_spec(name).schema()["function"]["description"] for name in DEFAULT_HELDOUT_TOOLS}
    config = CorpusConfig()
    heldout = [heldout_task_document(index, config) for index in range(40)]
    documents = (document(index, replace(config, warmup_docs=0)) for index in range(120))
    corpus = [text for kind, text in documents if kind == "task"]
    shown = lambda texts: {d for d in descriptions for t in texts if f'"description": {json.dumps(d)}' in t}  # noqa: E731
    assert shown(heldout) and not shown(corpus)
    assert heldout == [heldout_task_document(index, config) for index in range(40)]  # the same every build
    assert all(offered_names(text) for text in heldout)


def test_resuming_with_another_config_is_refused(tmp_path) -> None:
    pretrain(SMALL, tmp_path, progress=False, stop_at=2)
    with pytest.raises(ValueError, match="another pretraining config"):
        pretrain(replace(SMALL, lr=0.5), tmp_path, progress=False, resume=True)


def test_only_measuring_settings_may_differ_at_a_resume() -> None:
    saved = json.loads(json.dumps(SMALL.to_dict()))
    assert same_build(saved, replace(SMALL, task_eval_every=7, task_eval_tasks=3, probe_heldout_docs=0))
    assert not same_build(saved, replace(SMALL, probe_docs=3))
    assert not same_build("not a config", SMALL)


def test_bad_settings_are_one_line_errors(tmp_path) -> None:
    with pytest.raises(ValueError, match="stop_at must be a positive step"):
        pretrain(SMALL, tmp_path, progress=False, stop_at=-5)
    with pytest.raises(ValueError, match="pretrain.steps"):
        replace(SMALL, steps=0)
    with pytest.raises(ValueError, match="pretrain.lr"):
        replace(SMALL, lr=-1.0)
    with pytest.raises(ValueError, match="pretrain.task_eval_tasks must be an int >= 0"):
        replace(SMALL, task_eval_tasks=-1)


def test_a_folder_holding_a_build_is_refused_unless_resumed_or_forced(tmp_path) -> None:
    out = tmp_path / "build"
    (out / "model").mkdir(parents=True)  # what a finished build leaves (the check runs before any work)
    (out / "model" / "model.safetensors").write_bytes(b"weights")
    (out / "metrics.jsonl").write_text('{"step": 3000}\n')
    (out / "checkpoints" / "step-003000").mkdir(parents=True)
    with pytest.raises(RunFolderTaken, match=r"already holds a run .*--resume to continue it, --force to replace it"):
        pretrain(SMALL, out, progress=False)
    assert (out / "metrics.jsonl").read_text() == '{"step": 3000}\n'  # nothing lost
    assert (out / "model" / "model.safetensors").read_bytes() == b"weights"
    # --force replaces the build: a fresh one, its checkpoints and metrics only.
    assert pretrain(replace(SMALL, steps=2), out, progress=False, force=True) is not None
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    assert sorted(p.name for p in (out / "checkpoints").glob("step-*")) == ["step-000002"]
    assert (out / "model" / "model.safetensors").read_bytes() != b"weights"


def test_a_file_or_a_checkpoint_is_no_place_for_a_build(tmp_path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(RunFolderTaken, match="is a file, not a folder"):
        pretrain(SMALL, tmp_path / "file", progress=False)
    inside = tmp_path / "run" / "checkpoints" / "step-000002" / "model"
    inside.mkdir(parents=True)
    with pytest.raises(RunFolderTaken, match="is inside the checkpoint"):
        pretrain(SMALL, inside, progress=False, force=True)
    assert not list(inside.iterdir())


def test_a_build_holds_its_folder(tmp_path) -> None:
    with hold_run_folder(tmp_path / "held", "another build"):
        with pytest.raises(RunFolderBusy, match=r"being written by pid \d+ \(another build"):
            pretrain(SMALL, tmp_path / "held", progress=False)


def test_pruning_keeps_the_checkpoint_just_written(tmp_path) -> None:
    model, tokenizer = load_model("tiny", n_corpus_tasks=20)
    for step in (900, 950):  # an earlier run's later steps
        save_checkpoint(tmp_path, step, model=model, tokenizer=None, state={}, info={})
    written = save_checkpoint(tmp_path, 3, model=model, tokenizer=None, state={}, info={}, keep_last=2)
    assert written.is_dir() and (tmp_path / "latest").read_text().strip() == written.name
    assert sorted(p.name for p in tmp_path.glob("step-*")) == ["step-000003", "step-000950"]


def test_the_resume_hint_carries_every_setting_the_build_started_with() -> None:
    args = argparse.Namespace(
        out="runs/my reader",
        steps=1200,
        seed=3,
        bf16=True,
        device="cuda:1",
        set=["init=reader", "corpus.mix=[[task, 1]]"],
    )
    assert resume_command(args) == (
        "python -m recipes.reader.pretrain --out 'runs/my reader' --steps 1200 --seed 3 --bf16 --device cuda:1 "
        "--set init=reader --set 'corpus.mix=[[task, 1]]' --resume"
    )
    plain = argparse.Namespace(out="runs/reader", steps=None, seed=0, bf16=False, device="cpu", set=[])
    assert resume_command(plain) == "python -m recipes.reader.pretrain --out runs/reader --resume"


def test_force_removes_a_linked_build_folder_not_what_it_points_to(tmp_path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "kept").mkdir(parents=True)
    out = tmp_path / "build"
    out.mkdir()
    (out / "model").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(RunFolderTaken, match="already holds a run"):
        pretrain(SMALL, out, progress=False)
    assert pretrain(replace(SMALL, steps=2), out, progress=False, force=True) is not None
    assert (elsewhere / "kept").is_dir() and not (out / "model").is_symlink()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_device_this_machine_lacks_is_one_line_naming_the_flag_before_any_work(tmp_path) -> None:
    with pytest.raises(ConfigError, match="--device is 'cuda' but this torch sees no CUDA device"):
        pretrain(SMALL, tmp_path / "build", progress=False, device="cuda")
    with pytest.raises(ConfigError, match="--device must be auto, cpu, cuda or cuda:N, got 'gpu'"):
        pretrain(SMALL, tmp_path / "build", progress=False, device="gpu")
    assert not (tmp_path / "build").exists()


def test_the_step_and_the_probe_make_every_tensor_on_the_models_device(tmp_path, monkeypatch) -> None:
    """With the default device set to meta (where nothing computes), a tensor made without a device
    meets the CPU model and fails, as it would meet a CUDA one: a loss total made on the CPU once
    stopped the first GPU build."""
    module = pretrain_module

    def on_meta(function):
        def placed(*args, **kwargs):
            torch.set_default_device("meta")
            try:
                return function(*args, **kwargs)
            finally:
                torch.set_default_device(None)

        return placed

    for name in ("next_token_loss", "probe"):
        monkeypatch.setattr(module, name, on_meta(getattr(module, name)))
    assert pretrain(replace(SMALL, steps=2), tmp_path / "build", progress=False) is not None


def test_cli_settings_are_applied_and_a_bad_one_is_one_line_naming_its_key(tmp_path, capsys, monkeypatch) -> None:
    seen = []
    monkeypatch.setattr(pretrain_module, "pretrain", lambda config, *a, **k: seen.append(config) or tmp_path)
    assert main(["--out", str(tmp_path / "b"), "--set", "init=reader", "--set", "corpus.warmup_docs=0"]) == 0
    assert seen[0].init == "reader" and seen[0].corpus.warmup_docs == 0 and seen[0].lr == PretrainConfig().lr
    for override, message in (("lr=-1", "pretrain.lr must be > 0"), ("corpus.nope=1", "corpus.nope")):
        assert main(["--out", str(tmp_path / "c"), "--set", override]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, err
    assert len(seen) == 1


def test_a_model_to_continue_that_cannot_be_loaded_is_one_line_and_force_loses_nothing(tmp_path) -> None:
    built = pretrain(replace(SMALL, steps=2), tmp_path / "build", progress=False)
    before = sorted(p.name for p in (tmp_path / "build").iterdir())
    with pytest.raises(ValueError, match=r"^pretrain\.init: model folder .*missing does not exist"):
        pretrain(replace(SMALL, init=str(tmp_path / "missing")), tmp_path / "build", progress=False, force=True)
    assert sorted(p.name for p in (tmp_path / "build").iterdir()) == before and built.is_dir()


def test_a_retired_corpus_switch_is_one_line_naming_its_key(tmp_path, capsys) -> None:
    """The corpus is frozen: a switch of an earlier corpus is an unknown key, not a silent no-op."""
    assert main(["--out", str(tmp_path / "b"), "--set", "corpus.near_misses=true"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "corpus.near_misses" in err, err
    assert not (tmp_path / "b").exists()


def test_the_command_runs_as_a_module_from_the_repository_root() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "recipes.reader.pretrain", "--help"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "--resume" in result.stdout and "--stop-at" in result.stdout
