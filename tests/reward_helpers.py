"""The weather task and three answers to it that the reward tests share: a call then a summary, the
call twice, and no call at all."""

from __future__ import annotations

from tool_schemas import WEATHER_CALL, weather_tool

from slca_grpo.datatypes import Task, ToolCall

TOOLS = [weather_tool()]
RESPONSE = '<tool_response>{"city": "Paris", "temperature": 22}</tool_response>'
TEXTS = [
    f"{WEATHER_CALL}{RESPONSE}It is 22 degrees in Paris today.",
    f"{WEATHER_CALL}{WEATHER_CALL}{RESPONSE}{RESPONSE}It is 22 degrees in Paris today.",
    "No idea, sorry about that.",
]
TASK = Task(
    id="w",
    messages=[{"role": "user", "content": "Weather in Paris?"}],
    tools=TOOLS,
    gold_calls=[[ToolCall("get_weather", {"city": "Paris"})]],
)
