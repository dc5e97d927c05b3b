"""Secrets come from a file or the environment; a secret on the command line still works but warns."""

import pytest

from slca_grpo.secrets import SecretError, read_secret_file, resolve_secret


def test_a_secret_file_gives_its_first_line(tmp_path):
    secret = tmp_path / "token"
    secret.write_text("  s3cret  \nsecond line\n")
    assert read_secret_file(secret, "--token-file") == "s3cret"


@pytest.mark.parametrize(
    "content, message", [("", "the file is empty"), ("\n  \n", "the file is empty"), (None, "No such file")]
)
def test_unusable_secret_files_are_one_line_errors_naming_the_flag(tmp_path, content, message):
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SecretError, match=f"--token-file {path}: {message}"):
        read_secret_file(path, "--token-file")


def test_order_file_then_deprecated_flag_then_environment(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MY_TOKEN", "from-env")
    secret = tmp_path / "token"
    secret.write_text("from-file\n")
    kwargs = dict(file_flag="--token-file", env=("MY_TOKEN",), flag="--token")
    assert resolve_secret(file=str(secret), flag_value="from-flag", **kwargs) == "from-file"
    assert capsys.readouterr().err == ""
    assert resolve_secret(file=None, flag_value="from-flag", **kwargs) == "from-flag"
    warning = capsys.readouterr().err
    assert "--token puts the secret in the process list" in warning and "$MY_TOKEN or --token-file" in warning
    assert resolve_secret(file=None, flag_value=None, **kwargs) == "from-env"
    assert resolve_secret(file=None, flag_value=None, read_env=False, **kwargs) is None
    monkeypatch.delenv("MY_TOKEN")
    assert resolve_secret(file=None, flag_value=None, **kwargs) is None


def test_serve_sim_and_eval_read_token_files(tmp_path, capsys, monkeypatch):
    from slca_grpo.cli import main

    monkeypatch.delenv("SLCA_SIM_TOKEN", raising=False)
    missing = tmp_path / "missing-token"
    assert main(["serve-sim", "--host", "0.0.0.0", "--port", "1", "--token-file", str(missing)]) == 2
    assert f"--token-file {missing}: No such file" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.write_text("")
    assert (
        main(
            [
                "eval",
                "indomain",
                "--policy",
                "oracle",
                "--tasks",
                "synthetic",
                "--limit",
                "1",
                "--simulator",
                "http://127.0.0.1:1",
                "--simulator-token-file",
                str(empty),
                "--out",
                str(tmp_path / "eval"),
            ]
        )
        == 2
    )
    assert f"--simulator-token-file {empty}: the file is empty" in capsys.readouterr().err
