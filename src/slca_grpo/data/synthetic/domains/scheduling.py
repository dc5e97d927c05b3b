"""Calendar tools: events, free slots and reminders (domain name ``calendar``)."""

from __future__ import annotations

import random

from slca_grpo.data.synthetic.spec import (
    BOOL,
    DATE,
    INT,
    STR,
    TIME,
    Args,
    CatalogueTool,
    ChainSpec,
    Response,
    array,
    closed,
    date_param,
    integer,
    maybe,
    obj,
    string,
    time_param,
)
from slca_grpo.data.synthetic.values import (
    CALENDARS,
    EVENT_TITLES,
    REMINDER_TEXTS,
    ValuePool,
    add_minutes,
    clock_time,
    distinct_dates,
    iso_date,
    make_id,
    pick,
    pick_distinct,
)

DURATIONS = (15, 30, 45, 60, 90, 120)
LOCATIONS: ValuePool[str] = ValuePool(
    (
        "Room 4B",
        "the main office",
        "Café Central",
        "Zoom",
        "the clinic",
        "home",
        "Conference room A",
        "the public library",
        "the community centre",
        "Studio 3",
        "the town hall",
        "the rooftop terrace",
    ),
    shared=("home",),  # also a product category (search_products' enum)
)


def _minutes_surface(value: object) -> str:
    return f"{value} minutes"


# --- create_event ---


def _create_args(rng: random.Random) -> Args:
    args: Args = {"title": pick(rng, EVENT_TITLES), "date": iso_date(rng), "start_time": clock_time(rng, 8, 18)}
    if maybe(rng, 0.5):
        args["duration_minutes"] = pick(rng, DURATIONS)
    if maybe(rng, 0.3):
        args["location"] = pick(rng, LOCATIONS)
    return args


def _create_respond(args: Args, rng: random.Random) -> Response:
    duration = int(args.get("duration_minutes", 60))
    response: Response = {
        "event_id": make_id("EV-", rng),
        "title": args["title"],
        "date": args["date"],
        "start_time": args["start_time"],
        "end_time": add_minutes(args["start_time"], duration),
    }
    if "location" in args:
        response["location"] = args["location"]
    return response


def _create_summary(args: Args, r: Response) -> str:
    where = f" at {r['location']}" if "location" in r else ""
    return (
        f'"{r["title"]}" is on your calendar for {r["date"]} from {r["start_time"]} to {r["end_time"]}{where} '
        f"(event {r['event_id']})."
    )


# --- list_events ---


def _list_args(rng: random.Random, with_options: bool = True) -> Args:
    args: Args = {"date": iso_date(rng)}
    if with_options and maybe(rng, 0.35):
        args["calendar"] = pick(rng, CALENDARS)
    return args


def _list_respond(args: Args, rng: random.Random) -> Response:
    starts = sorted(clock_time(rng, 8, 18, 30) for _ in range(rng.randint(1, 3)))
    events = [
        {
            "event_id": make_id("EV-", rng),
            "title": title,
            "start_time": start,
            "end_time": add_minutes(start, pick(rng, DURATIONS)),
        }
        for title, start in zip(pick_distinct(rng, EVENT_TITLES, len(starts)), starts)
    ]
    return {"date": args["date"], "calendar": args.get("calendar", "all"), "events": events}


def _list_summary(args: Args, r: Response) -> str:
    listing = "; ".join(f"{e['start_time']}-{e['end_time']} {e['title']} ({e['event_id']})" for e in r["events"])
    return f"You have {len(r['events'])} event(s) on {r['date']}: {listing}."


# --- delete_event ---


def _delete_args(rng: random.Random) -> Args:
    return {"event_id": make_id("EV-", rng)}


def _delete_respond(args: Args, rng: random.Random) -> Response:
    return {"event_id": args["event_id"], "deleted": True}


def _delete_summary(args: Args, r: Response) -> str:
    return f"Event {r['event_id']} has been deleted from your calendar."


# --- find_free_slot ---


def _free_args(rng: random.Random) -> Args:
    return {"date": iso_date(rng), "duration_minutes": pick(rng, DURATIONS)}


def _free_respond(args: Args, rng: random.Random) -> Response:
    duration = int(args["duration_minutes"])
    starts = sorted({clock_time(rng, 8, 17, 30) for _ in range(3)})
    return {
        "date": args["date"],
        "duration_minutes": duration,
        "slots": [{"start_time": s, "end_time": add_minutes(s, duration)} for s in starts],
    }


def _free_summary(args: Args, r: Response) -> str:
    listing = ", ".join(f"{s['start_time']}-{s['end_time']}" for s in r["slots"])
    return f"Free {r['duration_minutes']}-minute slots on {r['date']}: {listing}."


# --- set_reminder ---


def _reminder_args(rng: random.Random) -> Args:
    return {"text": pick(rng, REMINDER_TEXTS), "date": iso_date(rng), "time": clock_time(rng, 7, 21)}


def _reminder_respond(args: Args, rng: random.Random) -> Response:
    return {"reminder_id": make_id("RM-", rng), "text": args["text"], "remind_at": f"{args['date']}T{args['time']}"}


def _reminder_summary(args: Args, r: Response) -> str:
    return f"I'll remind you to {r['text']} at {r['remind_at'].replace('T', ' ')} (reminder {r['reminder_id']})."


_DURATION = integer("Length in minutes", minimum=5, maximum=480)

TOOLS = (
    CatalogueTool(
        name="create_event",
        domain="calendar",
        description="Create a calendar event.",
        parameters=obj(
            {
                "title": string("Event title"),
                "date": date_param(),
                "start_time": time_param("Start time as HH:MM (24-hour)"),
                "duration_minutes": integer("Length in minutes (default 60)", minimum=5, maximum=480),
                "location": string("Where the event takes place"),
            },
            required=("title", "date", "start_time"),
        ),
        returns=closed(
            {"event_id": STR, "title": STR, "date": DATE, "start_time": TIME, "end_time": TIME, "location": STR},
            optional=("location",),
        ),
        capability="create calendar events",
        sample_args=_create_args,
        respond=_create_respond,
        summarize=_create_summary,
        train_phrasings=(
            'Schedule "{title}" on {date} at {start_time}[ for {duration_minutes}][ at {location}].',
            "Add {title} to my calendar for {date} at {start_time}[, lasting {duration_minutes}][, location {location}].",
            "Create an event called {title} on {date} starting {start_time}[ ({duration_minutes})][ in {location}].",
            'Put "{title}" in my calendar: {date}, {start_time}[, {duration_minutes}][, at {location}].',
        ),
        test_phrasings=(
            "Block my calendar on {date} at {start_time} for {title}[, {duration_minutes} long][; it's at {location}].",
            'Please set up "{title}" for {date}, beginning at {start_time}[ and running {duration_minutes}][ ({location})].',
        ),
        surface_overrides={"duration_minutes": _minutes_surface},
    ),
    CatalogueTool(
        name="list_events",
        domain="calendar",
        description="List the calendar events on a date, in order of start time.",
        parameters=obj(
            {
                "date": date_param(),
                "calendar": string("Which calendar (default all)", enum=CALENDARS),
            },
            required=("date",),
        ),
        returns=closed(
            {
                "date": DATE,
                "calendar": STR,
                "events": array(closed({"event_id": STR, "title": STR, "start_time": TIME, "end_time": TIME})),
            }
        ),
        capability="list your calendar events",
        sample_args=_list_args,
        respond=_list_respond,
        summarize=_list_summary,
        train_phrasings=(
            "What's on my[ {calendar}] calendar on {date}?",
            "List my[ {calendar}] events for {date}.",
            "Do I have any[ {calendar}] meetings on {date}?",
            "Show my schedule for {date}[ ({calendar} calendar)].",
        ),
        test_phrasings=(
            "How busy am I on {date}?[ Only the {calendar} calendar.]",
            "Walk me through my[ {calendar}] agenda for {date}.",
        ),
        parallel_slot="date",
        parallel_values=lambda rng, n, base: distinct_dates(rng, n),
    ),
    CatalogueTool(
        name="delete_event",
        domain="calendar",
        description="Delete a calendar event by its event_id.",
        parameters=obj({"event_id": string("Event identifier, e.g. 'EV-3JD81K'")}, required=("event_id",)),
        returns=closed({"event_id": STR, "deleted": BOOL}),
        capability="delete calendar events",
        sample_args=_delete_args,
        respond=_delete_respond,
        summarize=_delete_summary,
        train_phrasings=(
            "Delete event {event_id}.",
            "Remove {event_id} from my calendar.",
            "Please cancel calendar entry {event_id}.",
        ),
        test_phrasings=(
            "Get rid of the appointment with id {event_id}.",
            "Erase {event_id} from the calendar, I won't attend.",
        ),
        parallel_slot="event_id",
        parallel_values=lambda rng, n, base: [make_id("EV-", rng) for _ in range(n)],
    ),
    CatalogueTool(
        name="find_free_slot",
        domain="calendar",
        description="Find free time slots of a given length on a date, earliest first.",
        parameters=obj({"date": date_param(), "duration_minutes": _DURATION}, required=("date", "duration_minutes")),
        returns=closed(
            {"date": DATE, "duration_minutes": INT, "slots": array(closed({"start_time": TIME, "end_time": TIME}))}
        ),
        capability="find free time in your calendar",
        sample_args=_free_args,
        respond=_free_respond,
        summarize=_free_summary,
        train_phrasings=(
            "When am I free for {duration_minutes} on {date}?",
            "Find a free slot of {duration_minutes} on {date}.",
            "Do I have {duration_minutes} available on {date}? Show me the options.",
        ),
        test_phrasings=(
            "Which gaps of {duration_minutes} does my calendar have on {date}?",
            "I need {duration_minutes} of open time on {date}. What's possible?",
        ),
        surface_overrides={"duration_minutes": _minutes_surface},
    ),
    CatalogueTool(
        name="set_reminder",
        domain="calendar",
        description="Set a reminder that notifies you at a date and time.",
        parameters=obj(
            {"text": string("What to be reminded of"), "date": date_param(), "time": time_param()},
            required=("text", "date", "time"),
        ),
        returns=closed({"reminder_id": STR, "text": STR, "remind_at": STR}),
        capability="set reminders",
        sample_args=_reminder_args,
        respond=_reminder_respond,
        summarize=_reminder_summary,
        train_phrasings=(
            "Remind me to {text} on {date} at {time}.",
            "Set a reminder for {date} at {time}: {text}.",
            "Can you make sure I remember to {text}? Ping me on {date} at {time}.",
        ),
        test_phrasings=(
            "On {date} at {time}, nudge me to {text}.",
            "Create an alert for {time} on {date} so I {text}.",
        ),
    ),
)


def _delete_first_event(first: Args, response: Response, rng: random.Random) -> tuple[Args, list[str]]:
    return {"event_id": response["events"][0]["event_id"]}, ["event_id"]


def _book_earliest_slot(first: Args, response: Response, rng: random.Random) -> tuple[Args, list[str]]:
    args: Args = {
        "title": pick(rng, EVENT_TITLES),
        "date": first["date"],
        "start_time": response["slots"][0]["start_time"],
        "duration_minutes": first["duration_minutes"],
    }
    return args, ["start_time"]


CHAINS = (
    ChainSpec(
        first="list_events",
        second="delete_event",
        link=_delete_first_event,
        first_args=lambda rng: _list_args(rng, with_options=False),
        train_phrasings=(
            "Cancel my first event on {date}.",
            "Look at my calendar for {date} and delete the earliest event.",
            "Remove whatever is first on my schedule on {date}.",
        ),
        test_phrasings=(
            "Clear out the opening appointment of {date}.",
            "The earliest thing in my calendar on {date} is off. Please delete it.",
        ),
    ),
    ChainSpec(
        first="find_free_slot",
        second="create_event",
        link=_book_earliest_slot,
        train_phrasings=(
            'Find the earliest free slot of {duration_minutes} on {date} and schedule "{title}" then.',
            'Book "{title}" for {duration_minutes} on {date}, at the first time I\'m free.',
            "When's my first opening of {duration_minutes} on {date}? Put {title} there.",
        ),
        test_phrasings=(
            'Squeeze "{title}" ({duration_minutes}) into the earliest gap on {date}.',
            "Slot {title} into the first free window of {duration_minutes} on {date}.",
        ),
    ),
)
