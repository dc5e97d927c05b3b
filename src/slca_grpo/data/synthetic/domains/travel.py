"""Travel tools: flight and hotel search and booking, flight status."""

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
    number,
    obj,
    string,
)
from slca_grpo.data.synthetic.values import (
    AIRLINE_CODES,
    AIRLINES,
    CABINS,
    CITY_NAMES,
    CURRENCIES,
    HOTEL_WORDS,
    SEATS,
    add_days,
    add_minutes,
    clock_time,
    days_between,
    iso_date,
    make_id,
    money,
    person_name,
    pick,
    pick_distinct,
    price_str,
)

FLIGHT_STATUSES = ("on_time", "delayed", "cancelled", "boarding", "departed", "landed")
_CABIN_FACTOR = {"economy": 1.0, "premium_economy": 1.6, "business": 3.2, "first": 5.5}


def _route(rng: random.Random) -> tuple[str, str]:
    origin, destination = pick_distinct(rng, CITY_NAMES, 2)
    return origin, destination


# --- search_flights ---


def _flight_search_args(rng: random.Random, with_options: bool = True) -> Args:
    origin, destination = _route(rng)
    args: Args = {"origin": origin, "destination": destination, "date": iso_date(rng)}
    if with_options and maybe(rng, 0.3):
        args["cabin"] = pick(rng, CABINS)
    if with_options and maybe(rng, 0.3):
        args["passengers"] = rng.randint(2, 5)
    return args


def _flight_search_respond(args: Args, rng: random.Random) -> Response:
    cabin = args.get("cabin", "economy")
    currency = pick(rng, ("USD", "EUR"))
    flights = []
    for _ in range(rng.randint(2, 3)):
        departure = clock_time(rng, 5, 22, 5)
        flights.append(
            {
                "flight_id": make_id("FL-", rng),
                "airline": pick(rng, AIRLINES),
                "departure_time": departure,
                "arrival_time": add_minutes(departure, rng.randint(55, 720)),
                "price": money(rng.uniform(60, 650) * _CABIN_FACTOR[cabin]),
                "currency": currency,
            }
        )
    flights.sort(key=lambda f: f["price"])  # cheapest first: "book the cheapest" means the first one
    return {
        "origin": args["origin"],
        "destination": args["destination"],
        "date": args["date"],
        "cabin": cabin,
        "flights": flights,
    }


def _flight_search_summary(args: Args, r: Response) -> str:
    listing = "; ".join(
        f"{f['airline']} {f['flight_id']} departing {f['departure_time']} for {price_str(f['price'], f['currency'])}"
        for f in r["flights"]
    )
    return (
        f"I found {len(r['flights'])} {r['cabin'].replace('_', ' ')} flights from {r['origin']} to "
        f"{r['destination']} on {r['date']}: {listing}."
    )


# --- book_flight ---


def _book_flight_args(rng: random.Random) -> Args:
    args: Args = {"flight_id": make_id("FL-", rng), "passenger_name": person_name(rng)}
    if maybe(rng, 0.4):
        args["seat_preference"] = pick(rng, SEATS)
    return args


def _book_flight_respond(args: Args, rng: random.Random) -> Response:
    letters = {"window": "AF", "aisle": "CD"}.get(args.get("seat_preference", "any"), "ABCDEF")
    return {
        "booking_id": make_id("BK-", rng),
        "flight_id": args["flight_id"],
        "passenger_name": args["passenger_name"],
        "seat": f"{rng.randint(3, 38)}{pick(rng, letters)}",
        "status": "confirmed",
    }


def _book_flight_summary(args: Args, r: Response) -> str:
    return (
        f"Flight {r['flight_id']} is booked for {r['passenger_name']}: booking {r['booking_id']}, "
        f"seat {r['seat']}, status {r['status']}."
    )


# --- search_hotels ---


def _hotel_search_args(rng: random.Random, with_options: bool = True) -> Args:
    check_in = iso_date(rng)
    args: Args = {
        "city": pick(rng, CITY_NAMES),
        "check_in": check_in,
        "check_out": add_days(check_in, rng.randint(1, 6)),
    }
    if with_options and maybe(rng, 0.3):
        args["guests"] = rng.randint(2, 4)
    if with_options and maybe(rng, 0.25):
        args["max_price"] = float(rng.randrange(120, 400, 10))
    return args


def _hotel_search_respond(args: Args, rng: random.Random) -> Response:
    ceiling = float(args.get("max_price", 350.0))
    currency = pick(rng, CURRENCIES[:3])
    names = pick_distinct(rng, [f"{a} {b}" for a in HOTEL_WORDS[0] for b in HOTEL_WORDS[1]], rng.randint(2, 3))
    hotels = [
        {
            "hotel_id": make_id("HT-", rng),
            "name": name,
            "rating": round(rng.uniform(3.0, 5.0), 1),
            "price_per_night": money(rng.uniform(45, ceiling)),
            "currency": currency,
        }
        for name in names
    ]
    hotels.sort(key=lambda h: h["price_per_night"])
    return {"city": args["city"], "check_in": args["check_in"], "check_out": args["check_out"], "hotels": hotels}


def _hotel_search_summary(args: Args, r: Response) -> str:
    listing = "; ".join(
        f"{h['name']} ({h['hotel_id']}), rated {h['rating']}, at "
        f"{price_str(h['price_per_night'], h['currency'])} per night"
        for h in r["hotels"]
    )
    return f"Hotels in {r['city']} from {r['check_in']} to {r['check_out']}: {listing}."


# --- book_hotel ---


def _book_hotel_args(rng: random.Random) -> Args:
    check_in = iso_date(rng)
    return {
        "hotel_id": make_id("HT-", rng),
        "guest_name": person_name(rng),
        "check_in": check_in,
        "check_out": add_days(check_in, rng.randint(1, 6)),
    }


def _book_hotel_respond(args: Args, rng: random.Random) -> Response:
    nights = max(days_between(args["check_in"], args["check_out"]), 1)
    return {
        "reservation_id": make_id("RS-", rng),
        "hotel_id": args["hotel_id"],
        "guest_name": args["guest_name"],
        "check_in": args["check_in"],
        "check_out": args["check_out"],
        "nights": nights,
        "status": "confirmed",
    }


def _book_hotel_summary(args: Args, r: Response) -> str:
    return (
        f"Hotel {r['hotel_id']} is reserved for {r['guest_name']} from {r['check_in']} to {r['check_out']} "
        f"({r['nights']} nights): reservation {r['reservation_id']}, status {r['status']}."
    )


# --- get_flight_status ---


def _status_args(rng: random.Random) -> Args:
    args: Args = {"flight_number": f"{pick(rng, AIRLINE_CODES)}{rng.randint(100, 2999)}"}
    if maybe(rng, 0.4):
        args["date"] = iso_date(rng)
    return args


def _status_respond(args: Args, rng: random.Random) -> Response:
    scheduled = clock_time(rng, 5, 22, 5)
    status = pick(rng, FLIGHT_STATUSES)
    delay = rng.randint(15, 180) if status == "delayed" else 0
    return {
        "flight_number": args["flight_number"],
        "status": status,
        "gate": f"{pick(rng, 'ABCDE')}{rng.randint(1, 40)}",
        "scheduled_departure": scheduled,
        "estimated_departure": add_minutes(scheduled, delay),
    }


def _status_summary(args: Args, r: Response) -> str:
    return (
        f"Flight {r['flight_number']} is {r['status'].replace('_', ' ')}: gate {r['gate']}, scheduled at "
        f"{r['scheduled_departure']}, expected to leave at {r['estimated_departure']}."
    )


_FLIGHT = {
    "flight_id": STR,
    "airline": STR,
    "departure_time": TIME,
    "arrival_time": TIME,
    "price": NUM,
    "currency": STR,
}
_HOTEL = {"hotel_id": STR, "name": STR, "rating": NUM, "price_per_night": NUM, "currency": STR}

TOOLS = (
    CatalogueTool(
        name="search_flights",
        domain="travel",
        description="Search for available flights between two cities on a date, cheapest first.",
        parameters=obj(
            {
                "origin": string("Departure city"),
                "destination": string("Arrival city"),
                "date": date_param("Departure date as YYYY-MM-DD"),
                "cabin": string("Cabin class (default economy)", enum=CABINS),
                "passengers": integer("Number of passengers", minimum=1, maximum=9),
            },
            required=("origin", "destination", "date"),
        ),
        returns=closed(
            {
                "origin": STR,
                "destination": STR,
                "date": DATE,
                "cabin": enum_of(CABINS),
                "flights": array(closed(_FLIGHT)),
            }
        ),
        capability="search for flights",
        sample_args=_flight_search_args,
        respond=_flight_search_respond,
        summarize=_flight_search_summary,
        train_phrasings=(
            "Find flights from {origin} to {destination} on {date}[ in {cabin}][ for {passengers} passengers].",
            "Are there any flights from {origin} to {destination} on {date}?[ We are {passengers} people.][ Looking for {cabin} class.]",
            "Search for a[ {cabin}] flight from {origin} to {destination} departing {date}[, {passengers} travellers].",
            "I need to fly from {origin} to {destination} on {date}[ with {passengers} passengers][, {cabin} please]. What's available?",
        ),
        test_phrasings=(
            "Show me what flies {origin} to {destination} on {date}[ ({cabin})][ for a group of {passengers}].",
            "Which airlines go from {origin} to {destination} on {date}?[ Cabin: {cabin}.][ Seats needed: {passengers}.]",
        ),
    ),
    CatalogueTool(
        name="book_flight",
        domain="travel",
        description="Book a seat on a flight by its flight_id for one passenger.",
        parameters=obj(
            {
                "flight_id": string("Flight identifier from search_flights, e.g. 'FL-7Q2K9D'"),
                "passenger_name": string("Full name of the passenger"),
                "seat_preference": string("Preferred seat", enum=SEATS),
            },
            required=("flight_id", "passenger_name"),
        ),
        returns=closed({"booking_id": STR, "flight_id": STR, "passenger_name": STR, "seat": STR, "status": STR}),
        capability="book flights",
        sample_args=_book_flight_args,
        respond=_book_flight_respond,
        summarize=_book_flight_summary,
        train_phrasings=(
            "Book flight {flight_id} for {passenger_name}[ with a {seat_preference} seat].",
            "Please reserve a seat on {flight_id} for {passenger_name}[, {seat_preference} if possible].",
            "Put {passenger_name} on flight {flight_id}.[ Seat preference: {seat_preference}.]",
            "I'd like to book {flight_id} under the name {passenger_name}[ ({seat_preference} seat)].",
        ),
        test_phrasings=(
            "Go ahead and confirm {flight_id} for passenger {passenger_name}[; they prefer {seat_preference}].",
            "Can you get {passenger_name} a ticket on {flight_id}?[ A {seat_preference} seat would be great.]",
        ),
    ),
    CatalogueTool(
        name="search_hotels",
        domain="travel",
        description="Search for hotels in a city for given check-in and check-out dates, cheapest first.",
        parameters=obj(
            {
                "city": string("City to stay in"),
                "check_in": date_param("Check-in date as YYYY-MM-DD"),
                "check_out": date_param("Check-out date as YYYY-MM-DD"),
                "guests": integer("Number of guests", minimum=1, maximum=8),
                "max_price": number("Maximum price per night", minimum=0),
            },
            required=("city", "check_in", "check_out"),
        ),
        returns=closed({"city": STR, "check_in": DATE, "check_out": DATE, "hotels": array(closed(_HOTEL))}),
        capability="search for hotels",
        sample_args=_hotel_search_args,
        respond=_hotel_search_respond,
        summarize=_hotel_search_summary,
        train_phrasings=(
            "Find hotels in {city} from {check_in} to {check_out}[ for {guests} guests][ under {max_price} per night].",
            "I need a place to stay in {city}, checking in {check_in} and out {check_out}.[ We are {guests}.][ Budget {max_price} a night.]",
            "Search hotels in {city} between {check_in} and {check_out}[, max {max_price} per night][, {guests} people].",
            "What hotels are available in {city} from {check_in} until {check_out}?[ {guests} guests.]",
        ),
        test_phrasings=(
            "Look up accommodation in {city}: arriving {check_in}, leaving {check_out}[, party of {guests}][, no more than {max_price} nightly].",
            "Any rooms in {city} for {check_in} to {check_out}?[ Keep it below {max_price} per night.]",
        ),
    ),
    CatalogueTool(
        name="book_hotel",
        domain="travel",
        description="Reserve a hotel by its hotel_id for a guest and dates.",
        parameters=obj(
            {
                "hotel_id": string("Hotel identifier from search_hotels"),
                "guest_name": string("Full name of the main guest"),
                "check_in": date_param("Check-in date as YYYY-MM-DD"),
                "check_out": date_param("Check-out date as YYYY-MM-DD"),
            },
            required=("hotel_id", "guest_name", "check_in", "check_out"),
        ),
        returns=closed(
            {
                "reservation_id": STR,
                "hotel_id": STR,
                "guest_name": STR,
                "check_in": DATE,
                "check_out": DATE,
                "nights": INT,
                "status": STR,
            }
        ),
        capability="book hotels",
        sample_args=_book_hotel_args,
        respond=_book_hotel_respond,
        summarize=_book_hotel_summary,
        train_phrasings=(
            "Book hotel {hotel_id} for {guest_name} from {check_in} to {check_out}.",
            "Reserve {hotel_id} under {guest_name}, check-in {check_in}, check-out {check_out}.",
            "Please make a reservation at hotel {hotel_id} for {guest_name} between {check_in} and {check_out}.",
        ),
        test_phrasings=(
            "Lock in {hotel_id} for {guest_name}: arriving {check_in}, departing {check_out}.",
            "Can you secure a room at {hotel_id} for {guest_name} ({check_in} to {check_out})?",
        ),
    ),
    CatalogueTool(
        name="get_flight_status",
        domain="travel",
        description="Get the live status, gate and departure time of a flight by its flight number.",
        parameters=obj(
            {
                "flight_number": string("Airline flight number, e.g. 'SW482'"),
                "date": date_param("Date of the flight as YYYY-MM-DD (default today)"),
            },
            required=("flight_number",),
        ),
        returns=closed(
            {
                "flight_number": STR,
                "status": enum_of(FLIGHT_STATUSES),
                "gate": STR,
                "scheduled_departure": TIME,
                "estimated_departure": TIME,
            }
        ),
        capability="check flight status",
        sample_args=_status_args,
        respond=_status_respond,
        summarize=_status_summary,
        train_phrasings=(
            "Is flight {flight_number} on time[ on {date}]?",
            "What's the status of {flight_number}[ on {date}]?",
            "Check flight {flight_number}[ for {date}]: has it been delayed?",
            "Which gate does {flight_number} leave from[ on {date}]?",
        ),
        test_phrasings=(
            "My friend is on {flight_number}[ ({date})]. Is it running late?",
            "Give me the latest on flight {flight_number}[ scheduled for {date}].",
        ),
        parallel_slot="flight_number",
        parallel_values=lambda rng, n, base: [
            f"{code}{rng.randint(100, 2999)}" for code in pick_distinct(rng, ("SW", "AN", "BJ", "PA", "MR", "CL"), n)
        ],
    ),
)


def _book_cheapest_flight(first: Args, response: Response, rng: random.Random) -> tuple[Args, list[str]]:
    args: Args = {"flight_id": response["flights"][0]["flight_id"], "passenger_name": person_name(rng)}
    if maybe(rng, 0.3):
        args["seat_preference"] = pick(rng, SEATS)
    return args, ["flight_id"]


def _book_cheapest_hotel(first: Args, response: Response, rng: random.Random) -> tuple[Args, list[str]]:
    args: Args = {
        "hotel_id": response["hotels"][0]["hotel_id"],
        "guest_name": person_name(rng),
        "check_in": first["check_in"],
        "check_out": first["check_out"],
    }
    return args, ["hotel_id"]


CHAINS = (
    ChainSpec(
        first="search_flights",
        second="book_flight",
        link=_book_cheapest_flight,
        first_args=lambda rng: _flight_search_args(rng, with_options=False),
        train_phrasings=(
            "Find the cheapest flight from {origin} to {destination} on {date} and book it for {passenger_name}[ with a {seat_preference} seat].",
            "I need to get from {origin} to {destination} on {date}. Book the cheapest option for {passenger_name}.[ Seat: {seat_preference}.]",
            "Search flights {origin} to {destination} for {date}, then reserve the lowest fare for {passenger_name}[ ({seat_preference} seat)].",
        ),
        test_phrasings=(
            "Get {passenger_name} onto whichever {origin} to {destination} flight is cheapest on {date}[, {seat_preference} seat preferred].",
            "Book {passenger_name} the least expensive seat from {origin} to {destination} on {date}.[ They like {seat_preference} seats.]",
        ),
    ),
    ChainSpec(
        first="search_hotels",
        second="book_hotel",
        link=_book_cheapest_hotel,
        first_args=lambda rng: _hotel_search_args(rng, with_options=False),
        train_phrasings=(
            "Find the cheapest hotel in {city} from {check_in} to {check_out} and book it for {guest_name}.",
            "Search hotels in {city} for {check_in} to {check_out} and reserve the lowest-priced one under {guest_name}.",
            "I need a cheap room in {city}, {check_in} until {check_out}. Book the cheapest hotel for {guest_name}.",
        ),
        test_phrasings=(
            "Reserve the most affordable hotel in {city} for {guest_name}, staying {check_in} through {check_out}.",
            "Put {guest_name} in whichever {city} hotel costs least from {check_in} to {check_out}.",
        ),
    ),
)
