"""Secrets come from a file or the environment; a secret on the command line still works but warns;
endpoint API keys follow one order: explicit, the role's variable, $OPENAI_API_KEY."""

import pytest

from slca_grpo.keys import SecretError, read_secret_file, resolve_api_key, resolve_secret


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


def test_api_keys_come_from_the_explicit_key_then_the_role_variable_then_openai_api_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ROLE_KEY", raising=False)
    assert resolve_api_key() is None and resolve_api_key(env=("ROLE_KEY", None)) is None
    monkeypatch.setenv("OPENAI_API_KEY", "from-openai")
    assert resolve_api_key() == "from-openai"
    assert resolve_api_key(env=("ROLE_KEY",)) == "from-openai"
    monkeypatch.setenv("ROLE_KEY", "from-role")
    assert resolve_api_key(env=("ROLE_KEY",)) == "from-role"
    assert resolve_api_key(env=(None,)) == "from-openai"  # RewardConfig(api_key_env=None)
    assert resolve_api_key("explicit", env=("ROLE_KEY",)) == "explicit"
    assert resolve_api_key("", env=("ROLE_KEY",)) == "from-role"  # an empty key is no key
    monkeypatch.setenv("ROLE_KEY", "")
    assert resolve_api_key(env=("ROLE_KEY",)) == "from-openai"  # nor is an empty variable


def test_every_endpoint_user_follows_the_key_order(monkeypatch):
    from slca_grpo.eval.tau2.spec import parse_user_llm
    from slca_grpo.rewards import RewardConfig, make_judge
    from slca_grpo.simulator import OpenAIConfig

    for name in ("OPENAI_API_KEY", "SLCA_SIM_API_KEY", "JUDGE_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert OpenAIConfig(model="m").resolved_api_key() is None
    assert parse_user_llm("openai:http://h/v1#m").api_key == "EMPTY"  # litellm wants some key
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    config = RewardConfig(api_key_env="JUDGE_KEY")
    assert make_judge("openai:http://h/v1#m", config).endpoint.config.api_key == "sk-openai"
    assert OpenAIConfig(model="m").endpoint().api_key == "sk-openai"
    assert parse_user_llm("openai:http://h/v1#m").api_key == "sk-openai"
    monkeypatch.setenv("SLCA_SIM_API_KEY", "sk-sim")
    monkeypatch.setenv("JUDGE_KEY", "sk-judge")
    assert make_judge("openai:http://h/v1#m", config).endpoint.config.api_key == "sk-judge"
    assert OpenAIConfig(model="m").resolved_api_key() == "sk-sim"
    assert OpenAIConfig(model="m", api_key="sk-config").resolved_api_key() == "sk-config"
    assert parse_user_llm("openai:http://h/v1#m", api_key="sk-given").api_key == "sk-given"


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
