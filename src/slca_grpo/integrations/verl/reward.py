"""The reward function verl calls (``reward.custom_reward_function``): HierR of one rollout.

verl's reward manager calls ``compute_score(data_source, solution_str, ground_truth, extra_info,
**reward_kwargs)`` once per rollout. It returns ``score`` (verl's scalar reward) together with
``r_tool``, ``r_sum`` and ``no_call``; verl keeps the whole dict as the rollout's
``reward_extra_info``, where the trainer override reads them back. No verl import.

The text scored is the one our agent loop stores in ``extra_info["slca_response_text"]``: the
response decoded with its chat markers, as our own trainer scores it. verl's ``solution_str`` drops
special tokens (``<|im_start|>user`` becomes ``user``), which would leak into the final answer; it
is used only when a row comes from another agent loop. The loop also stores each assistant turn's
text (``slca_turn_texts``) for the per-turn reward of ``slca-turn``, returned as a JSON list.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from slca_grpo.algos import Estimator, estimator_spec, list_estimators
from slca_grpo.chat.parser import is_call_turn, last_turn_text
from slca_grpo.integrations.verl.advantages import ANSWERED_KEY, VOID_KEY, extra_key
from slca_grpo.integrations.verl.config import SECTION, plain, read_section
from slca_grpo.integrations.verl.rows import task_from_extra_info
from slca_grpo.plugins import load_plugins
from slca_grpo.rewards.batch import compute_rewards, families_for
from slca_grpo.rewards.config import RewardConfig
from slca_grpo.rewards.factory import make_checker, make_judge
from slca_grpo.rewards.hierarchical import HIERR_NAMES

RESPONSE_TEXT_FIELD = "slca_response_text"
TURN_TEXTS_FIELD = "slca_turn_texts"  # each assistant turn's text, for per-turn rewards
SIMULATOR_FAULT_FIELD = "slca_simulator_fault"  # the kind of the first simulator fault, "" if none

__all__ = [
    "RESPONSE_TEXT_FIELD",
    "SIMULATOR_FAULT_FIELD",
    "TURN_TEXTS_FIELD",
    "compute_score",
    "our_estimator",
    "reward_names",
]


@lru_cache(maxsize=16)
def _services(reward_json: str) -> tuple[RewardConfig, Any, Any]:
    """The reward config with its judge and checker, built once per process and config."""
    config = read_section({SECTION: {"reward": json.loads(reward_json)}}).reward
    return config, make_judge(config=config), make_checker(config=config)


def our_estimator(name: str | None) -> Estimator | None:
    """Our estimator registered as ``name``; None when there is none (verl's own estimator runs)."""
    return estimator_spec(name) if name in list_estimators() else None


def reward_names(estimator: Estimator | str | None) -> tuple[str, ...]:
    """HierR's values, plus those ``estimator`` reads when it is one of ours (e.g. ToolPO's)."""
    ours = estimator if isinstance(estimator, Estimator) else our_estimator(estimator)
    extra = ours.rewards if ours is not None else ()
    return tuple(dict.fromkeys((*HIERR_NAMES, *extra)))


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    *,
    reward: Mapping[str, Any] | None = None,
    estimator: str | None = None,
    plugins: Sequence[str] = (),
    reward_router_address: str | None = None,
    reward_model_tokenizer: Any = None,
) -> dict[str, float | bool]:
    """``{"score", "r_tool", "r_sum", "no_call", "answered", "void", ...}`` of one rollout;
    ``answered`` says whether its last turn is an answer (not a call cut off unanswered), which
    decides whether its last run of tokens is the summary segment; ``void`` whether the simulator
    (as our agent loop recorded) or the judge or checker behind a reward the estimator reads failed
    on it, so that our estimators leave it out.

    ``reward`` is the ``slca.reward`` section (our ``RewardConfig``: judge, weights, penalties),
    ``estimator`` verl's ``algorithm.adv_estimator`` and ``plugins`` the ``slca.plugins`` (imported
    first, as they may register the estimator and its rewards); all come from
    ``reward.custom_reward_function.reward_kwargs``. The reward-model arguments verl passes when it
    runs a reward model are not used.
    """
    load_plugins(plain(plugins))
    task = task_from_extra_info(extra_info)
    text = extra_info.get(RESPONSE_TEXT_FIELD) if isinstance(extra_info, Mapping) else None
    if not isinstance(text, str):
        text = solution_str
    config, judge, checker = _services(json.dumps(plain(reward or {}), sort_keys=True))
    ours = our_estimator(estimator)  # looked up once per rollout scored
    names = reward_names(ours)
    turns = extra_info.get(TURN_TEXTS_FIELD) if isinstance(extra_info, Mapping) else None
    if turns is None and any(family.uses_turns for family in families_for(names)):
        # Cutting the text at its </tool_call> tags could give more turns than the mask has runs.
        raise ValueError(
            f"estimator {estimator!r} reads a per-turn reward, which needs each turn's text in extra_info "
            f"[{TURN_TEXTS_FIELD!r}]; run the rollouts with our agent loop (slca_tool_agent)"
        )
    batch = compute_rewards(
        [text], [task], judge, config, names=names, checker=checker, turns=[list(turns)] if turns is not None else None
    )
    # A per-turn reward (one value per turn) is a JSON list: verl's extras hold a scalar or a string each.
    scores: dict[str, float | bool] = {
        extra_key(name): json.dumps(values[0]) if isinstance(values[0], list) else values[0]
        for name, values in batch.as_dict().items()
    }
    last_turn = str(turns[-1]) if turns else last_turn_text(text)
    scores[ANSWERED_KEY] = not is_call_turn(last_turn)
    trained = ours.rewards if ours is not None else ("score",)
    fault = extra_info.get(SIMULATOR_FAULT_FIELD) if isinstance(extra_info, Mapping) else None
    scores[VOID_KEY] = bool(fault) or batch.failed_for(trained)[0]
    return scores
