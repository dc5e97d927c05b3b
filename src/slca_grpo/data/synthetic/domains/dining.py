"""Dining tools: restaurant search, table reservations and recipes."""

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
    time_param,
)
from slca_grpo.data.synthetic.values import (
    CITY_NAMES,
    CUISINES,
    DISHES,
    PRICE_LEVELS,
    RESTAURANT_WORDS,
    ValuePool,
    clock_time,
    iso_date,
    make_id,
    pick,
    pick_distinct,
)

_PANTRY: ValuePool[str] = ValuePool(
    (
        "olive oil",
        "garlic",
        "onion",
        "tomatoes",
        "rice",
        "flour",
        "eggs",
        "butter",
        "chickpeas",
        "coconut milk",
        "ginger",
        "lime",
        "parmesan",
        "mushrooms",
        "chicken",
        "noodles",
        "bell pepper",
        "cumin",
        "basil",
        "bananas",
        "carrots",
        "lemon",
        "spinach",
        "potatoes",
    )
)


def _party_surface(value: object) -> str:
    return f"{value} people" if value != 1 else "one person"


# --- search_restaurants ---


def _search_args(rng: random.Random, with_options: bool = True) -> Args:
    args: Args = {"city": pick(rng, CITY_NAMES)}
    if not with_options or maybe(rng, 0.5):
        args["cuisine"] = pick(rng, CUISINES)
    if with_options and maybe(rng, 0.3):
        args["price_level"] = pick(rng, PRICE_LEVELS)
    return args


def _search_respond(args: Args, rng: random.Random) -> Response:
    names = pick_distinct(
        rng, [f"{a} {b}" for a in RESTAURANT_WORDS[0] for b in RESTAURANT_WORDS[1]], rng.randint(2, 3)
    )
    restaurants = [
        {
            "restaurant_id": make_id("RT-", rng),
            "name": name,
            "cuisine": args.get("cuisine", pick(rng, CUISINES)),
            "rating": round(rng.uniform(3.2, 4.9), 1),
            "price_level": args.get("price_level", pick(rng, PRICE_LEVELS)),
        }
        for name in names
    ]
    restaurants.sort(key=lambda r: -r["rating"])  # best-rated first
    return {"city": args["city"], "restaurants": restaurants}


def _search_summary(args: Args, r: Response) -> str:
    listing = "; ".join(
        f"{x['name']} ({x['restaurant_id']}), {x['cuisine']}, rated {x['rating']}, {x['price_level']}"
        for x in r["restaurants"]
    )
    return f"Restaurants in {r['city']}: {listing}."


# --- make_reservation ---


def _reservation_args(rng: random.Random) -> Args:
    return {
        "restaurant_id": make_id("RT-", rng),
        "date": iso_date(rng),
        "time": clock_time(rng, 12, 21, 30),
        "party_size": rng.randint(2, 8),
    }


def _reservation_respond(args: Args, rng: random.Random) -> Response:
    return {
        "reservation_id": make_id("TB-", rng),
        "restaurant_id": args["restaurant_id"],
        "date": args["date"],
        "time": args["time"],
        "party_size": args["party_size"],
        "status": "confirmed",
    }


def _reservation_summary(args: Args, r: Response) -> str:
    return (
        f"Your table for {r['party_size']} at {r['restaurant_id']} on {r['date']} at {r['time']} is "
        f"{r['status']} (reservation {r['reservation_id']})."
    )


# --- get_recipe ---


def _recipe_args(rng: random.Random) -> Args:
    args: Args = {"dish": pick(rng, DISHES)}
    if maybe(rng, 0.4):
        args["servings"] = rng.randint(2, 8)
    return args


def _recipe_respond(args: Args, rng: random.Random) -> Response:
    return {
        "dish": args["dish"],
        "servings": int(args.get("servings", 4)),
        "prep_minutes": rng.randrange(15, 95, 5),
        "ingredients": pick_distinct(rng, _PANTRY, rng.randint(4, 6)),
    }


def _recipe_summary(args: Args, r: Response) -> str:
    return (
        f"{r['dish'].capitalize()} for {r['servings']} takes about {r['prep_minutes']} minutes; you need "
        f"{', '.join(r['ingredients'])}."
    )


TOOLS = (
    CatalogueTool(
        name="search_restaurants",
        domain="dining",
        description="Search restaurants in a city, best-rated first.",
        parameters=obj(
            {
                "city": string("City to search in"),
                "cuisine": string("Type of food", enum=CUISINES),
                "price_level": string("Price range", enum=PRICE_LEVELS),
            },
            required=("city",),
        ),
        returns=closed(
            {
                "city": STR,
                "restaurants": array(
                    closed(
                        {
                            "restaurant_id": STR,
                            "name": STR,
                            "cuisine": enum_of(CUISINES),
                            "rating": NUM,
                            "price_level": enum_of(PRICE_LEVELS),
                        }
                    )
                ),
            }
        ),
        capability="find restaurants",
        sample_args=_search_args,
        respond=_search_respond,
        summarize=_search_summary,
        train_phrasings=(
            "Find[ {price_level}][ {cuisine}] restaurants in {city}.",
            "Where can I eat[ {cuisine} food] in {city}?[ Something {price_level}.]",
            "Recommend some[ {cuisine}] places to eat in {city}[, {price_level} range].",
            "Search for[ {price_level}][ {cuisine}] restaurants around {city}.",
        ),
        test_phrasings=(
            "I'm hungry in {city}.[ Craving {cuisine}.] Any good spots[ that are {price_level}]?",
            "List dining options in {city}[ serving {cuisine}][ at a {price_level} price].",
        ),
        parallel_slot="city",
        parallel_values=lambda rng, n, base: pick_distinct(rng, CITY_NAMES, n),
    ),
    CatalogueTool(
        name="make_reservation",
        domain="dining",
        description="Reserve a table at a restaurant by its restaurant_id.",
        parameters=obj(
            {
                "restaurant_id": string("Restaurant identifier from search_restaurants"),
                "date": date_param(),
                "time": time_param(),
                "party_size": integer("Number of people", minimum=1, maximum=20),
            },
            required=("restaurant_id", "date", "time", "party_size"),
        ),
        returns=closed(
            {"reservation_id": STR, "restaurant_id": STR, "date": DATE, "time": TIME, "party_size": INT, "status": STR}
        ),
        capability="reserve restaurant tables",
        sample_args=_reservation_args,
        respond=_reservation_respond,
        summarize=_reservation_summary,
        train_phrasings=(
            "Book a table at {restaurant_id} for {party_size} on {date} at {time}.",
            "Reserve {restaurant_id} on {date}, {time}, for {party_size}.",
            "Get us a table for {party_size} at restaurant {restaurant_id}, {date} at {time}.",
        ),
        test_phrasings=(
            "Hold a table for {party_size} at {restaurant_id}: {date}, around {time}.",
            "Can you make a dinner booking at {restaurant_id} ({party_size}, {date} at {time})?",
        ),
        surface_overrides={"party_size": _party_surface},
    ),
    CatalogueTool(
        name="get_recipe",
        domain="dining",
        description="Get a recipe for a dish: ingredients and preparation time.",
        parameters=obj(
            {
                "dish": string("Name of the dish"),
                "servings": integer("Number of servings (default 4)", minimum=1, maximum=20),
            },
            required=("dish",),
        ),
        returns=closed({"dish": STR, "servings": INT, "prep_minutes": INT, "ingredients": array(STR)}),
        capability="look up recipes",
        sample_args=_recipe_args,
        respond=_recipe_respond,
        summarize=_recipe_summary,
        train_phrasings=(
            "How do I make {dish}[ for {servings} people]?",
            "Give me a recipe for {dish}[, {servings} servings].",
            "What do I need to cook {dish}[ for {servings}]?",
        ),
        test_phrasings=(
            "I'd like to try cooking {dish} tonight[ for {servings} of us]. What's the recipe?",
            "Ingredients and timing for {dish}[, serving {servings}], please.",
        ),
        parallel_slot="dish",
        parallel_values=lambda rng, n, base: pick_distinct(rng, DISHES, n),
    ),
)


def _reserve_best_rated(first: Args, response: Response, rng: random.Random) -> tuple[Args, list[str]]:
    args: Args = {
        "restaurant_id": response["restaurants"][0]["restaurant_id"],
        "date": iso_date(rng),
        "time": clock_time(rng, 12, 21, 30),
        "party_size": rng.randint(2, 8),
    }
    return args, ["restaurant_id"]


CHAINS = (
    ChainSpec(
        first="search_restaurants",
        second="make_reservation",
        link=_reserve_best_rated,
        first_args=lambda rng: _search_args(rng, with_options=False),
        train_phrasings=(
            "Find the best-rated {cuisine} restaurant in {city} and book a table for {party_size} on {date} at {time}.",
            "Book {party_size} into the top-rated {cuisine} place in {city}, {date} at {time}.",
            "Reserve a table for {party_size} at the highest-rated {cuisine} restaurant in {city} on {date}, {time}.",
        ),
        test_phrasings=(
            "We'd like the best {cuisine} spot in {city}: a table for {party_size} on {date} at {time}, please.",
            "Get {party_size} a reservation at {city}'s top {cuisine} restaurant for {date} at {time}.",
        ),
    ),
)
