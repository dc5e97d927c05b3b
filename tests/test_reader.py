"""The shipped reader: it loads offline by name, and it copies values it has never seen."""

from __future__ import annotations

import json

import pytest
import torch

import slca_grpo.models as models
from slca_grpo.data.corpus import CorpusConfig, document
from slca_grpo.models import READER, load_model, reader_path
from slca_grpo.models.tiny import TinyModelConfig
from slca_grpo.trainer.pretrain import READER_SHAPE, PretrainConfig
from slca_grpo.trainer.reader_probes import drill_accuracy


@pytest.fixture(scope="module")
def reader():
    return load_model(READER)


def test_the_reader_loads_by_name_with_its_documented_shape(reader):
    model, tokenizer = reader
    config = model.config
    assert (config.num_hidden_layers, config.hidden_size) == (READER_SHAPE.num_layers, READER_SHAPE.hidden_size)
    assert (config.num_attention_heads, config.num_key_value_heads) == (
        READER_SHAPE.num_heads,
        READER_SHAPE.num_kv_heads,
    )
    assert len(tokenizer) == config.vocab_size
    assert tokenizer("QX-1234")["input_ids"][-4:] == [tokenizer.convert_tokens_to_ids(d) for d in "1234"]
    assert not model.training


def test_the_shipped_build_records_its_config():
    """The shipped folder says how it was built (docs/models.md), in settings the code still reads."""
    recorded = json.loads((reader_path() / "pretrain_config.json").read_text())
    config = PretrainConfig(**{k: v for k, v in recorded.items() if k not in ("model", "corpus")})
    assert TinyModelConfig(**recorded["model"]) == READER_SHAPE
    assert CorpusConfig(**recorded["corpus"]).seed == config.seed == 0
    assert config.steps * config.rows_per_step * config.seq_len > 10_000_000


def test_the_reader_copies_fresh_values(reader):
    torch.manual_seed(0)
    scores = drill_accuracy(*reader, per_kind=30, seed=7)
    # The shipped build: 94 % and 46 % on 50 drills of another seed (docs/models.md).
    assert scores["drill/repeat"] >= 0.75, scores
    assert scores["drill/convert"] >= 0.2, scores


def test_a_missing_reader_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(models, "READER_DIR", tmp_path / "absent")
    with pytest.raises(ValueError, match="slca pretrain"):
        load_model(READER)


def test_eval_takes_the_reader_as_a_policy(tmp_path):
    from slca_grpo.cli import main

    assert (
        main(["eval", "indomain", "--policy", "reader", "--tasks", "synthetic", "--limit", "2", "--out", str(tmp_path)])
        == 0
    )
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["n"] == 2


def test_corpus_documents_differ_from_the_probe_set():
    config = PretrainConfig()
    train = {document(index, config.corpus)[1] for index in range(50)}
    probe = {
        document(index, CorpusConfig(seed=config.corpus.seed + 1_000_003, warmup_docs=0))[1] for index in range(50)
    }
    assert not train & probe


def test_corpus_documents_fit_the_pretraining_rows(reader):
    """Documents are packed whole: none may be longer than a row (it would be cut)."""
    _, tokenizer = reader
    config = PretrainConfig()
    lengths = [len(tokenizer(document(index, config.corpus)[1])["input_ids"]) for index in range(0, 6000, 20)]
    assert max(lengths) < config.seq_len
