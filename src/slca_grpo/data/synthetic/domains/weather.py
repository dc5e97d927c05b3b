"""Weather tools: current conditions, forecasts, air quality, sunrise and sunset."""

from __future__ import annotations

import random

from slca_grpo.data.synthetic.spec import (
    DATE,
    INT,
    NUM,
    STR,
    TIME,
    Args,
    CatalogueTool,
    ChainSpec,
    Response,
    array,
    closed,
    date_param,
    enum_of,
    integer,
    maybe,
    obj,
    string,
)
from slca_grpo.data.synthetic.values import CITY_NAMES, add_days, add_minutes, iso_date, pick, pick_distinct

UNITS = ("celsius", "fahrenheit")
CONDITIONS = ("sunny", "partly_cloudy", "cloudy", "rain", "snow", "fog", "thunderstorm")
AQI_CATEGORIES = ("good", "moderate", "unhealthy_for_sensitive_groups", "unhealthy", "very_unhealthy")
POLLUTANTS = ("pm2_5", "pm10", "ozone", "no2")

_CITY = string("City name, e.g. 'Paris'")
_UNITS = string("Temperature units (default celsius)", enum=UNITS)


def _cities(rng: random.Random, count: int) -> list[str]:
    return pick_distinct(rng, CITY_NAMES, count)


def _temperature(celsius: float, units: str) -> float:
    return round(celsius * 9 / 5 + 32, 1) if units == "fahrenheit" else round(celsius, 1)


def _degree(units: str) -> str:
    return "°F" if units == "fahrenheit" else "°C"


def _condition(rng: random.Random, celsius: float) -> str:
    options = [c for c in CONDITIONS if c != "snow" or celsius < 2]
    return pick(rng, options)


# --- get_current_weather ---


def _current_args(rng: random.Random) -> Args:
    args: Args = {"city": pick(rng, CITY_NAMES)}
    if maybe(rng, 0.35):
        args["units"] = pick(rng, UNITS)
    return args


def _current_respond(args: Args, rng: random.Random) -> Response:
    units = args.get("units", "celsius")
    celsius = rng.uniform(-8, 34)
    return {
        "city": args["city"],
        "temperature": _temperature(celsius, units),
        "units": units,
        "condition": _condition(rng, celsius),
        "humidity": rng.randint(20, 95),
        "wind_kph": rng.randint(0, 45),
    }


def _current_summary(args: Args, r: Response) -> str:
    return (
        f"It is currently {r['temperature']}{_degree(r['units'])} and {r['condition'].replace('_', ' ')} "
        f"in {r['city']}, with {r['humidity']}% humidity and wind at {r['wind_kph']} km/h."
    )


# --- get_weather_forecast ---


def _forecast_args(rng: random.Random) -> Args:
    args: Args = {"city": pick(rng, CITY_NAMES), "days": rng.randint(2, 5)}
    if maybe(rng, 0.3):
        args["units"] = pick(rng, UNITS)
    return args


def _forecast_respond(args: Args, rng: random.Random) -> Response:
    units = args.get("units", "celsius")
    start = iso_date(rng)
    days = []
    for offset in range(int(args["days"])):
        low = rng.uniform(-6, 24)
        high = low + rng.uniform(3, 11)
        days.append(
            {
                "date": add_days(start, offset),
                "condition": _condition(rng, low),
                "low": _temperature(low, units),
                "high": _temperature(high, units),
            }
        )
    return {"city": args["city"], "units": units, "forecast": days}


def _forecast_summary(args: Args, r: Response) -> str:
    unit = _degree(r["units"])
    parts = [f"{d['date']}: {d['condition'].replace('_', ' ')}, {d['low']} to {d['high']}{unit}" for d in r["forecast"]]
    return f"The {len(parts)}-day forecast for {r['city']}: " + "; ".join(parts) + "."


# --- get_air_quality ---


def _air_args(rng: random.Random) -> Args:
    return {"city": pick(rng, CITY_NAMES)}


def _air_respond(args: Args, rng: random.Random) -> Response:
    aqi = rng.randint(5, 260)
    bounds = (50, 100, 150, 200, 10_000)
    category = next(cat for cat, top in zip(AQI_CATEGORIES, bounds) if aqi <= top)
    return {"city": args["city"], "aqi": aqi, "category": category, "dominant_pollutant": pick(rng, POLLUTANTS)}


def _air_summary(args: Args, r: Response) -> str:
    return (
        f"The air quality index in {r['city']} is {r['aqi']} ({r['category'].replace('_', ' ')}); "
        f"the main pollutant is {r['dominant_pollutant'].replace('_', '.')}."
    )


# --- get_sunrise_sunset ---


def _sun_args(rng: random.Random) -> Args:
    return {"city": pick(rng, CITY_NAMES), "date": iso_date(rng)}


def _sun_respond(args: Args, rng: random.Random) -> Response:
    sunrise = rng.randint(5 * 60, 8 * 60)
    sunset = rng.randint(16 * 60, 21 * 60 + 30)
    return {
        "city": args["city"],
        "date": args["date"],
        "sunrise": add_minutes("00:00", sunrise),
        "sunset": add_minutes("00:00", sunset),
        "day_length_minutes": sunset - sunrise,
    }


def _sun_summary(args: Args, r: Response) -> str:
    return (
        f"On {r['date']} in {r['city']} the sun rises at {r['sunrise']} and sets at {r['sunset']}, "
        f"giving {r['day_length_minutes']} minutes of daylight."
    )


TOOLS = (
    CatalogueTool(
        name="get_current_weather",
        domain="weather",
        description="Get the current weather conditions in a city.",
        parameters=obj({"city": _CITY, "units": _UNITS}, required=("city",)),
        returns=closed(
            {
                "city": STR,
                "temperature": NUM,
                "units": enum_of(UNITS),
                "condition": enum_of(CONDITIONS),
                "humidity": INT,
                "wind_kph": INT,
            }
        ),
        capability="check the current weather",
        sample_args=_current_args,
        respond=_current_respond,
        summarize=_current_summary,
        train_phrasings=(
            "What's the weather like in {city} right now?[ Please answer in {units}.]",
            "How warm is it in {city} at the moment?[ Give me the temperature in {units}.]",
            "Current conditions in {city}, please[, in {units}].",
            "Is it raining in {city} right now?[ Use {units}.]",
            "Can you check the weather in {city}[ in {units}]?",
        ),
        test_phrasings=(
            "I'm about to head out in {city}: what does it look like outside right now?[ Temperatures in {units}, please.]",
            "Tell me today's current weather for {city}[ (units: {units})].",
        ),
        parallel_slot="city",
        parallel_values=lambda rng, n, base: _cities(rng, n),
    ),
    CatalogueTool(
        name="get_weather_forecast",
        domain="weather",
        description="Get the daily weather forecast for a city for the coming days.",
        parameters=obj(
            {"city": _CITY, "days": integer("Number of days to forecast", minimum=1, maximum=7), "units": _UNITS},
            required=("city", "days"),
        ),
        returns=closed(
            {
                "city": STR,
                "units": enum_of(UNITS),
                "forecast": array(closed({"date": DATE, "condition": enum_of(CONDITIONS), "low": NUM, "high": NUM})),
            }
        ),
        capability="give weather forecasts",
        sample_args=_forecast_args,
        respond=_forecast_respond,
        summarize=_forecast_summary,
        train_phrasings=(
            "What's the forecast for {city} for the next {days} days[ in {units}]?",
            "Give me a {days}-day weather forecast for {city}[, in {units}].",
            "Will it rain in {city} over the next {days} days?[ Temperatures in {units}.]",
            "I need the {city} forecast covering {days} days[ in {units}].",
        ),
        test_phrasings=(
            "Planning a trip: how will the weather in {city} look over the coming {days} days?[ Use {units}.]",
            "Forecast please for {city}, {days} days ahead[, {units}].",
        ),
        parallel_slot="city",
        parallel_values=lambda rng, n, base: _cities(rng, n),
    ),
    CatalogueTool(
        name="get_air_quality",
        domain="weather",
        description="Get the current air quality index (AQI) and main pollutant in a city.",
        parameters=obj({"city": _CITY}, required=("city",)),
        returns=closed(
            {"city": STR, "aqi": INT, "category": enum_of(AQI_CATEGORIES), "dominant_pollutant": enum_of(POLLUTANTS)}
        ),
        capability="report air quality",
        sample_args=_air_args,
        respond=_air_respond,
        summarize=_air_summary,
        train_phrasings=(
            "How's the air quality in {city} today?",
            "What's the AQI in {city}?",
            "Check the pollution level in {city}.",
            "Is the air in {city} clean enough to go running?",
        ),
        test_phrasings=(
            "Is it safe to open the windows in {city}, air-quality wise?",
            "Air quality report for {city}, please.",
        ),
        parallel_slot="city",
        parallel_values=lambda rng, n, base: _cities(rng, n),
    ),
    CatalogueTool(
        name="get_sunrise_sunset",
        domain="weather",
        description="Get sunrise and sunset times for a city on a given date.",
        parameters=obj({"city": _CITY, "date": date_param()}, required=("city", "date")),
        returns=closed({"city": STR, "date": DATE, "sunrise": TIME, "sunset": TIME, "day_length_minutes": INT}),
        capability="look up sunrise and sunset times",
        sample_args=_sun_args,
        respond=_sun_respond,
        summarize=_sun_summary,
        train_phrasings=(
            "When does the sun rise and set in {city} on {date}?",
            "What time is sunset in {city} on {date}?",
            "Sunrise and sunset times for {city}, {date}.",
            "I want to catch the sunrise in {city} on {date}. What time is it?",
        ),
        test_phrasings=(
            "How much daylight will {city} get on {date}? I need sunrise and sunset.",
            "On {date}, at what times does the sun come up and go down in {city}?",
        ),
        parallel_slot="city",
        parallel_values=lambda rng, n, base: _cities(rng, n),
    ),
)

CHAINS: tuple[ChainSpec, ...] = ()
