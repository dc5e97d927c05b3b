"""Build judges and completeness checkers from spec strings: ``"rule"`` or ``"openai:BASE_URL#MODEL"``
(the grammar of ``slca_grpo.endpoints``; the key as ``slca_grpo.keys`` says)."""

from __future__ import annotations

from slca_grpo.endpoints import EndpointConfig, EndpointSpec, parse_endpoint_spec
from slca_grpo.keys import resolve_api_key
from slca_grpo.rewards.completeness import CompletenessChecker, RuleCompletenessChecker
from slca_grpo.rewards.config import RewardConfig
from slca_grpo.rewards.judge_base import Judge
from slca_grpo.rewards.openai_checker import OpenAICompletenessChecker
from slca_grpo.rewards.openai_judge import OpenAIJudge
from slca_grpo.rewards.rule_judge import RuleJudge

OFFLINE_SPEC = "rule"


def reward_endpoint(endpoint: EndpointSpec, config: RewardConfig) -> EndpointConfig:
    """How a judge or checker talks to ``endpoint``: the reward config's timeout, retries and
    concurrency, and the key as ``slca_grpo.keys`` finds it."""
    return EndpointConfig(
        endpoint.base_url,
        endpoint.model,
        api_key=resolve_api_key(env=(config.api_key_env,)),
        timeout_s=config.judge_timeout_s,
        max_retries=config.judge_max_retries,
        concurrency=config.judge_concurrency,
    )


def make_judge(spec: str | None = None, config: RewardConfig | None = None) -> Judge:
    """A judge from ``spec`` (default ``config.judge``), with the config's endpoint settings."""
    config = config or RewardConfig()
    endpoint = parse_endpoint_spec(spec if spec is not None else config.judge, offline=OFFLINE_SPEC)
    if endpoint is None:
        return RuleJudge()
    return OpenAIJudge(reward_endpoint(endpoint, config), temperature=config.judge_temperature)


def make_checker(spec: str | None = None, config: RewardConfig | None = None) -> CompletenessChecker:
    """A completeness checker from ``spec`` (default ``config.checker``)."""
    config = config or RewardConfig()
    endpoint = parse_endpoint_spec(spec if spec is not None else config.checker, offline=OFFLINE_SPEC)
    if endpoint is None:
        return RuleCompletenessChecker()
    return OpenAICompletenessChecker(reward_endpoint(endpoint, config), temperature=config.checker_temperature)
