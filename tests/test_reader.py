"""The shipped reader: it loads offline by name, with its documented shape, and serves as a policy.

How it was built, and how well it copies, is tested with its recipe (recipes/reader/tests).
"""

from __future__ import annotations

import json

import pytest

import slca_grpo.models as models
from slca_grpo.models import READER, load_model


@pytest.fixture(scope="module")
def reader():
    return load_model(READER)


def test_the_reader_loads_by_name_with_its_documented_shape(reader):
    model, tokenizer = reader
    config = model.config
    # docs/models.md: 4 layers of width 128, 4 attention heads sharing 2 key/value heads.
    assert (config.num_hidden_layers, config.hidden_size) == (4, 128)
    assert (config.num_attention_heads, config.num_key_value_heads) == (4, 2)
    assert len(tokenizer) == config.vocab_size
    assert tokenizer("QX-1234")["input_ids"][-4:] == [tokenizer.convert_tokens_to_ids(d) for d in "1234"]
    assert not model.training


def test_a_missing_reader_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(models, "READER_DIR", tmp_path / "absent")
    with pytest.raises(ValueError, match="python -m recipes.reader.pretrain"):
        load_model(READER)


def test_eval_takes_the_reader_as_a_policy(tmp_path):
    from slca_grpo.cli import main

    assert (
        main(["eval", "indomain", "--policy", "reader", "--tasks", "synthetic", "--limit", "2", "--out", str(tmp_path)])
        == 0
    )
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["n"] == 2
