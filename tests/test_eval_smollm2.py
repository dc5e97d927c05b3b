import json

import pytest

from slca_grpo.eval import policies
from slca_grpo.eval.bfcl import run_bfcl
from slca_grpo.eval.policies import resolve_model_agent


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_smollm2_runs_end_to_end_on_four_bfcl_simple_entries(tmp_path, monkeypatch, smollm2):
    asked = []

    def load_shared(source):  # what load_model("smollm2") gives, loaded once per session
        asked.append(source)
        return smollm2

    monkeypatch.setattr(policies, "load_model", load_shared)
    # 64 new tokens hold a call to any of these functions; the 135M model mostly answers in prose anyway.
    agent = resolve_model_agent("smollm2", max_new_tokens=64, batch_size=4)
    assert asked == ["smollm2"] and agent.model is smollm2[0]
    report = run_bfcl(agent, categories=["simple_python"], limit=4, out_dir=tmp_path, progress=False)
    assert len(report.results) == 4
    accuracy = report.accuracy["simple_python"]
    assert 0.0 <= accuracy <= 1.0 and accuracy * 4 == pytest.approx(round(accuracy * 4))
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["categories"]["simple_python"]["total"] == 4
    assert summary["categories"]["simple_python"]["correct"] == round(accuracy * 4)
    assert sum(1 for _ in open(tmp_path / "per_item.jsonl")) == 4
    print(f"SmolLM2-135M-Instruct, BFCL simple_python (4 entries): {accuracy:.2f}")
