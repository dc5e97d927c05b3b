"""Build judges and completeness checkers from spec strings: ``"rule"`` or ``"openai:URL#MODEL"``."""

from __future__ import annotations

import os

from slca_grpo.rewards.completeness import CompletenessChecker, RuleCompletenessChecker
from slca_grpo.rewards.config import RewardConfig
from slca_grpo.rewards.judge_base import Judge
from slca_grpo.rewards.rule_judge import RuleJudge

SPEC_HELP = "'rule' (offline) or 'openai:BASE_URL#MODEL', e.g. openai:http://localhost:8000/v1#gpt-oss-120b"


def parse_endpoint_spec(spec: str) -> tuple[str, str] | None:
    """(base_url, model) of an ``openai:URL#MODEL`` spec; None for ``rule``; ValueError otherwise."""
    text = (spec or "").strip()
    if text == "rule":
        return None
    if text.startswith("openai:"):
        url, sep, model = text[len("openai:") :].rpartition("#")
        if sep and url.strip() and model.strip():
            return url.strip(), model.strip()
    raise ValueError(f"bad judge/checker spec {spec!r}: expected {SPEC_HELP}")


def _api_key(config: RewardConfig) -> str | None:
    return os.environ.get(config.api_key_env) if config.api_key_env else None


def make_judge(spec: str | None = None, config: RewardConfig | None = None) -> Judge:
    """A judge from ``spec`` (default ``config.judge``), with the config's endpoint settings."""
    config = config or RewardConfig()
    endpoint = parse_endpoint_spec(spec if spec is not None else config.judge)
    if endpoint is None:
        return RuleJudge()
    from slca_grpo.rewards.openai_judge import OpenAIJudge  # httpx only when an endpoint is used

    return OpenAIJudge(
        endpoint[0],
        endpoint[1],
        api_key=_api_key(config),
        temperature=config.judge_temperature,
        timeout_s=config.judge_timeout_s,
        max_retries=config.judge_max_retries,
        concurrency=config.judge_concurrency,
    )


def make_checker(spec: str | None = None, config: RewardConfig | None = None) -> CompletenessChecker:
    """A completeness checker from ``spec`` (default ``config.checker``)."""
    config = config or RewardConfig()
    endpoint = parse_endpoint_spec(spec if spec is not None else config.checker)
    if endpoint is None:
        return RuleCompletenessChecker()
    from slca_grpo.rewards.openai_checker import OpenAICompletenessChecker

    return OpenAICompletenessChecker(
        endpoint[0],
        endpoint[1],
        api_key=_api_key(config),
        temperature=config.checker_temperature,
        timeout_s=config.judge_timeout_s,
        max_retries=config.judge_max_retries,
        concurrency=config.judge_concurrency,
    )
