"""Smart-home tools: thermostat, lights and door locks."""

from __future__ import annotations

import random

from slca_grpo.data.synthetic.spec import (
    BOOL,
    INT,
    NUM,
    STR,
    Args,
    CatalogueTool,
    ChainSpec,
    Response,
    closed,
    enum_of,
    integer,
    maybe,
    number,
    obj,
    string,
)
from slca_grpo.data.synthetic.values import DOORS, ROOMS, THERMOSTAT_MODES, clock_time, pick, pick_distinct

LIGHT_STATES = ("on", "off")


# --- set_thermostat ---


def _thermostat_args(rng: random.Random) -> Args:
    args: Args = {"temperature": float(rng.randint(16, 26))}
    if maybe(rng, 0.4):
        args["room"] = pick(rng, ROOMS)
    if maybe(rng, 0.3):
        args["mode"] = pick(rng, THERMOSTAT_MODES)
    return args


def _thermostat_respond(args: Args, rng: random.Random) -> Response:
    return {
        "room": args.get("room", "whole house"),
        "target_temperature": args["temperature"],
        "mode": args.get("mode", "auto"),
        "current_temperature": round(rng.uniform(14, 28), 1),
    }


def _thermostat_summary(args: Args, r: Response) -> str:
    return (
        f"The thermostat for the {r['room']} is set to {r['target_temperature']}°C in {r['mode']} mode; "
        f"it is {r['current_temperature']}°C there now."
    )


# --- control_lights ---


def _lights_args(rng: random.Random) -> Args:
    args: Args = {"room": pick(rng, ROOMS), "state": pick(rng, LIGHT_STATES)}
    if args["state"] == "on" and maybe(rng, 0.4):
        args["brightness"] = rng.randrange(10, 101, 10)
    return args


def _lights_respond(args: Args, rng: random.Random) -> Response:
    on = args["state"] == "on"
    return {"room": args["room"], "state": args["state"], "brightness": int(args.get("brightness", 100)) if on else 0}


def _lights_summary(args: Args, r: Response) -> str:
    if r["state"] == "off":
        return f"The lights in the {r['room']} are off."
    return f"The lights in the {r['room']} are on at {r['brightness']}% brightness."


# --- lock_door ---


def _lock_args(rng: random.Random) -> Args:
    return {"door": pick(rng, DOORS)}


def _lock_respond(args: Args, rng: random.Random) -> Response:
    return {"door": args["door"], "locked": True, "locked_at": clock_time(rng, 0, 23, 1)}


def _lock_summary(args: Args, r: Response) -> str:
    return f"The {r['door']} door is locked (since {r['locked_at']})."


def _percent(value: object) -> str:
    return f"{value}%"


TOOLS = (
    CatalogueTool(
        name="set_thermostat",
        domain="home",
        description="Set the target temperature of the smart thermostat in degrees Celsius.",
        parameters=obj(
            {
                "temperature": number("Target temperature in °C", minimum=5),
                "room": string("Room (default whole house)", enum=ROOMS),
                "mode": string("Heating mode", enum=THERMOSTAT_MODES),
            },
            required=("temperature",),
        ),
        returns=closed(
            {"room": STR, "target_temperature": NUM, "mode": enum_of(THERMOSTAT_MODES), "current_temperature": NUM}
        ),
        capability="control the thermostat",
        sample_args=_thermostat_args,
        respond=_thermostat_respond,
        summarize=_thermostat_summary,
        train_phrasings=(
            "Set the thermostat to {temperature} degrees[ in the {room}][ on {mode} mode].",
            "Make it {temperature}°C[ in the {room}].[ Use {mode} mode.]",
            "Change the[ {room}] temperature to {temperature} degrees[, {mode}].",
        ),
        test_phrasings=(
            "It's uncomfortable[ in the {room}]. Bring it to {temperature} degrees[ with the {mode} setting].",
            "Adjust the heating to {temperature}°C[ for the {room}][ ({mode})].",
        ),
    ),
    CatalogueTool(
        name="control_lights",
        domain="home",
        description="Turn the lights in a room on or off, optionally setting brightness.",
        parameters=obj(
            {
                "room": string("Room", enum=ROOMS),
                "state": string("Turn on or off", enum=LIGHT_STATES),
                "brightness": integer("Brightness percentage when on", minimum=1, maximum=100),
            },
            required=("room", "state"),
        ),
        returns=closed({"room": STR, "state": enum_of(LIGHT_STATES), "brightness": INT}),
        capability="switch lights on and off",
        sample_args=_lights_args,
        respond=_lights_respond,
        summarize=_lights_summary,
        train_phrasings=(
            "Turn {state} the lights in the {room}[ at {brightness}].",
            "Switch the {room} lights {state}[ and set them to {brightness}].",
            "Lights {state} in the {room}, please[, {brightness} brightness].",
        ),
        test_phrasings=(
            "Could you flip the {room} lighting {state}[ (brightness {brightness})]?",
            "I want the lights {state} in the {room}[, dimmed to {brightness}].",
        ),
        parallel_slot="room",
        parallel_values=lambda rng, n, base: pick_distinct(rng, ROOMS, n),
        surface_overrides={"brightness": _percent},
    ),
    CatalogueTool(
        name="lock_door",
        domain="home",
        description="Lock one of the smart door locks.",
        parameters=obj({"door": string("Which door", enum=DOORS)}, required=("door",)),
        returns=closed({"door": STR, "locked": BOOL, "locked_at": STR}),
        capability="lock doors",
        sample_args=_lock_args,
        respond=_lock_respond,
        summarize=_lock_summary,
        train_phrasings=(
            "Lock the {door} door.",
            "Please make sure the {door} door is locked.",
            "Can you lock the {door} door for me?",
        ),
        test_phrasings=(
            "I forgot to secure the {door} door. Lock it, please.",
            "Bolt the {door} entrance.",
        ),
        parallel_slot="door",
        parallel_values=lambda rng, n, base: pick_distinct(rng, DOORS, n),
    ),
)

CHAINS: tuple[ChainSpec, ...] = ()
