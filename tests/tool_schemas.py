"""Tool schemas the tests share: one builder of OpenAI-format tool schemas, and the ``get_weather``
tool most tests call, in the variants they were written against. The simulator tests' fuller one
(units, days, a returns schema) is ``simulator_helpers.WEATHER_TOOL``, built with the same builder."""

from __future__ import annotations

from typing import Any

STRING = {"type": "string"}


def function_tool(
    name: str,
    properties: dict[str, Any] | None = None,
    required: list[str] | None = None,
    *,
    description: str | None = None,
    returns: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``{"type": "function", "function": {...}}``; keys left out when not given (``properties``
    None: parameters without ``properties``; ``description`` None: no description)."""
    parameters: dict[str, Any] = {"type": "object"}
    if properties is not None:
        parameters["properties"] = properties
    if required:
        parameters["required"] = required
    if extra:
        parameters.update(extra)
    function: dict[str, Any] = {"name": name}
    if description is not None:
        function["description"] = description
    function["parameters"] = parameters
    if returns is not None:
        function["returns"] = returns
    return {"type": "function", "function": function}


def string_tool(name: str, *params: str, description: str | None = None) -> dict[str, Any]:
    """A tool whose parameters are all optional strings."""
    return function_tool(name, {param: dict(STRING) for param in params}, description=description)


def weather_tool(
    *, description: str | None = None, city_required: bool = False, returns: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``get_weather(city: string)``, a fresh dict each call."""
    return function_tool(
        "get_weather",
        {"city": dict(STRING)},
        ["city"] if city_required else None,
        description=description,
        returns=returns,
    )


WEATHER_CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
WEATHER_RESPONSE = '{"city": "Paris", "temperature": 22, "condition": "sunny"}'
