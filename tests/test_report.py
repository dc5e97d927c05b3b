import json

import pytest

from slca_grpo.cli import main
from slca_grpo.report import compare_runs


def fake_training_run(path, estimator, success, truncated=(0.0, 0.0, 0.0, 0.0)):
    path.mkdir()
    evals = [
        {"step": -1, "success@0.9": 0.1, "name_f1": 0.5, "truncated": 0.25},
        {"step": 3, "success@0.9": success, "name_f1": 0.8, "calls": 1.5, "truncated": 0.125},
    ]
    summary = {
        "estimator": estimator,
        "steps": 4,
        "final_eval": evals[-1],
        "evals": evals,
        "grad_norm_std": 0.1,
        "grad_norm_mean": 0.5,
    }
    (path / "summary.json").write_text(json.dumps(summary))
    rows = [{"step": i, "reward/score": 0.1 * i, "rollout/truncated": truncated[i]} for i in range(4)]
    rows.append({"step": 3, "reward/score": 0.3, "rollout/truncated": truncated[3]})  # a resumed step, once
    (path / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_training_runs_side_by_side(tmp_path):
    runs = [
        fake_training_run(tmp_path / "a", "grpo", 0.25, truncated=(0.5, 0.25, 0.25, 0.0)),
        fake_training_run(tmp_path / "b", "slca", 0.5),
    ]
    report = compare_runs(runs, tmp_path / "out")
    table = (tmp_path / "out" / "report.md").read_text()
    assert "| start (before RL) | 10.00 |" in table
    assert "| grpo | 25.00 |" in table and "| slca | 50.00 |" in table
    # Every row says how many rollouts were cut off before an answer: held out, and in training.
    assert "| Truncated % | Truncated (train) % |" in table
    assert "| 12.50 | 25.00 |" in table and "| 12.50 | 0.00 |" in table and "| 25.00 | – |" in table
    assert report["runs"][0]["train_truncated"] == pytest.approx(0.25)
    assert [r["name"] for r in report["runs"]] == ["grpo", "slca"]
    assert (tmp_path / "out" / "curves.png").stat().st_size > 1000


def test_evaluation_runs_side_by_side(tmp_path, capsys):
    indomain, bfcl = tmp_path / "indomain", tmp_path / "bfcl"
    assert (
        main(["eval", "indomain", "--policy", "oracle", "--tasks", "synthetic", "--limit", "6", "--out", str(indomain)])
        == 0
    )
    assert (
        main(
            [
                "eval",
                "bfcl",
                "--policy",
                "oracle",
                "--categories",
                "simple",
                "--limit",
                "2",
                "--out",
                str(bfcl),
                "--no-progress",
            ]
        )
        == 0
    )
    from slca_grpo.eval.tau2 import Tau2OracleAgent, run_tau2

    tau2 = tmp_path / "tau2"
    run_tau2(Tau2OracleAgent(domain="retail"), "retail", user="scripted", out_dir=tau2, limit=1, progress=False)
    assert main(["report", str(indomain), str(bfcl), str(tau2), "--out", str(tmp_path / "cmp")]) == 0
    table = (tmp_path / "cmp" / "report.md").read_text()
    assert "bfcl simple_python" in table and "bfcl overall" in table and "name_f1" in table
    report = json.loads((tmp_path / "cmp" / "report.json").read_text())
    assert report["runs"][0]["metrics"]["name_f1"] == 1.0
    assert report["runs"][1]["metrics"]["bfcl overall"] == 1.0
    assert report["runs"][2]["metrics"]["tau2 pass^1"] == 1.0
    assert (tmp_path / "cmp" / "comparison.png").stat().st_size > 1000
    # Mixing kinds, or a folder that is no run, is a clear error.
    fake_training_run(tmp_path / "train", "grpo", 0.3)
    assert main(["report", str(indomain), str(tmp_path / "train"), "--out", str(tmp_path / "x")]) == 2
    assert main(["report", str(tmp_path / "nothing"), "--out", str(tmp_path / "x")]) == 2
    assert "no summary.json" in capsys.readouterr().err
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "summary.json").write_text("{}")
    with pytest.raises(ValueError, match="neither a training run"):
        compare_runs([tmp_path / "odd"], tmp_path / "y")
