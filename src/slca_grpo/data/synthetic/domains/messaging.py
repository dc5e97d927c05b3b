"""Messaging tools: e-mail, text messages, contacts and the inbox."""

from __future__ import annotations

import random

from slca_grpo.data.synthetic.spec import (
    BOOL,
    INT,
    STR,
    Args,
    CatalogueTool,
    ChainSpec,
    Response,
    array,
    boolean,
    closed,
    integer,
    maybe,
    obj,
    string,
)
from slca_grpo.data.synthetic.values import (
    EMAIL_BODIES,
    EMAIL_SUBJECTS,
    INBOX_FOLDERS,
    SMS_TEXTS,
    clock_time,
    email_for,
    iso_date,
    make_id,
    person_name,
    phone_number,
    pick,
)

# --- send_email ---


def _email_args(rng: random.Random) -> Args:
    args: Args = {
        "to": email_for(person_name(rng), rng),
        "subject": pick(rng, EMAIL_SUBJECTS),
        "body": pick(rng, EMAIL_BODIES),
    }
    if maybe(rng, 0.25):
        args["cc"] = email_for(person_name(rng), rng)
    return args


def _email_respond(args: Args, rng: random.Random) -> Response:
    return {"message_id": make_id("MSG-", rng, 8), "status": "sent", "to": args["to"], "subject": args["subject"]}


def _email_summary(args: Args, r: Response) -> str:
    return f'Your email "{r["subject"]}" to {r["to"]} was sent (message {r["message_id"]}).'


# --- send_sms ---


def _sms_args(rng: random.Random) -> Args:
    return {"phone_number": phone_number(rng), "message": pick(rng, SMS_TEXTS)}


def _sms_respond(args: Args, rng: random.Random) -> Response:
    return {
        "message_id": make_id("SMS-", rng, 8),
        "status": "delivered",
        "phone_number": args["phone_number"],
        "segments": 1 + len(str(args["message"])) // 160,
    }


def _sms_summary(args: Args, r: Response) -> str:
    return f"Your text message to {r['phone_number']} was {r['status']} (message {r['message_id']})."


# --- find_contact ---


def _contact_args(rng: random.Random) -> Args:
    return {"name": person_name(rng)}


def _contact_respond(args: Args, rng: random.Random) -> Response:
    name = str(args["name"])
    contacts = [
        {"contact_id": make_id("CT-", rng), "name": name, "email": email_for(name, rng), "phone": phone_number(rng)}
    ]
    if maybe(rng, 0.4):  # a namesake further down the list: the best match stays first
        other = f"{name.split()[0]} {person_name(rng).split()[-1]}"
        if other != name:
            contacts.append(
                {
                    "contact_id": make_id("CT-", rng),
                    "name": other,
                    "email": email_for(other, rng),
                    "phone": phone_number(rng),
                }
            )
    return {"query": name, "contacts": contacts}


def _contact_summary(args: Args, r: Response) -> str:
    listing = "; ".join(f"{c['name']} ({c['contact_id']}): {c['email']}, {c['phone']}" for c in r["contacts"])
    return f"Contacts matching {r['query']}: {listing}."


# --- read_inbox ---


def _inbox_args(rng: random.Random) -> Args:
    args: Args = {}
    if maybe(rng, 0.5):
        args["folder"] = pick(rng, INBOX_FOLDERS)
    if maybe(rng, 0.4):
        args["unread_only"] = True
    if maybe(rng, 0.4):
        args["limit"] = rng.randint(2, 5)
    return args


def _inbox_respond(args: Args, rng: random.Random) -> Response:
    count = min(int(args.get("limit", 3)), rng.randint(1, 3))
    unread_only = bool(args.get("unread_only", False))
    day = iso_date(rng)
    messages = [
        {
            "from": email_for(person_name(rng), rng),
            "subject": pick(rng, EMAIL_SUBJECTS),
            "received_at": f"{day}T{clock_time(rng, 6, 22, 1)}",
            "unread": unread_only or maybe(rng, 0.5),
        }
        for _ in range(count)
    ]
    return {"folder": args.get("folder", "inbox"), "messages": messages}


def _inbox_summary(args: Args, r: Response) -> str:
    listing = "; ".join(
        f'"{m["subject"]}" from {m["from"]} ({"unread" if m["unread"] else "read"})' for m in r["messages"]
    )
    return f"Latest in your {r['folder']} folder: {listing}."


def _unread_surface(value: object) -> str:
    return "unread " if value else ""


TOOLS = (
    CatalogueTool(
        name="send_email",
        domain="messaging",
        description="Send an email.",
        parameters=obj(
            {
                "to": string("Recipient email address"),
                "subject": string("Subject line"),
                "body": string("Message text"),
                "cc": string("Email address to copy in"),
            },
            required=("to", "subject", "body"),
        ),
        returns=closed({"message_id": STR, "status": STR, "to": STR, "subject": STR}),
        capability="send emails",
        sample_args=_email_args,
        respond=_email_respond,
        summarize=_email_summary,
        train_phrasings=(
            'Email {to} with the subject "{subject}" saying: {body}[ Copy {cc}.]',
            "Send an email to {to}[ (cc {cc})]. Subject: {subject}. Message: {body}",
            'Write to {to}, subject "{subject}": "{body}"[ and cc {cc}]',
            'Please mail {to}[ and cc {cc}] about "{subject}". The text is: {body}',
        ),
        test_phrasings=(
            'Drop {to} a note titled "{subject}" that says "{body}"[, with {cc} in copy].',
            'Fire off an email: recipient {to}, subject {subject}, body "{body}"[, cc {cc}].',
        ),
    ),
    CatalogueTool(
        name="send_sms",
        domain="messaging",
        description="Send a text message (SMS) to a phone number.",
        parameters=obj(
            {"phone_number": string("Recipient phone number"), "message": string("Text to send")},
            required=("phone_number", "message"),
        ),
        returns=closed({"message_id": STR, "status": STR, "phone_number": STR, "segments": INT}),
        capability="send text messages",
        sample_args=_sms_args,
        respond=_sms_respond,
        summarize=_sms_summary,
        train_phrasings=(
            'Text {phone_number}: "{message}"',
            'Send an SMS to {phone_number} saying "{message}"',
            'Message {phone_number} with "{message}"',
        ),
        test_phrasings=(
            "Shoot a quick text over to {phone_number}: {message}",
            'Let {phone_number} know by SMS: "{message}"',
        ),
    ),
    CatalogueTool(
        name="find_contact",
        domain="messaging",
        description="Search your address book for a contact by name, best match first.",
        parameters=obj({"name": string("Name of the person")}, required=("name",)),
        returns=closed(
            {"query": STR, "contacts": array(closed({"contact_id": STR, "name": STR, "email": STR, "phone": STR}))}
        ),
        capability="look up your contacts",
        sample_args=_contact_args,
        respond=_contact_respond,
        summarize=_contact_summary,
        train_phrasings=(
            "What's {name}'s email address?",
            "Look up {name} in my contacts.",
            "Find the phone number of {name}.",
            "Do I have contact details for {name}?",
        ),
        test_phrasings=(
            "How do I reach {name}? Check the address book.",
            "Pull up {name}'s contact card.",
        ),
        parallel_slot="name",
        parallel_values=lambda rng, n, base: list(dict.fromkeys(person_name(rng) for _ in range(n * 4)))[:n],
    ),
    CatalogueTool(
        name="read_inbox",
        domain="messaging",
        description="List the most recent emails in a mailbox folder.",
        parameters=obj(
            {
                "folder": string("Mailbox folder (default inbox)", enum=INBOX_FOLDERS),
                "unread_only": boolean("Only unread messages"),
                "limit": integer("Maximum number of messages", minimum=1, maximum=50),
            }
        ),
        returns=closed(
            {
                "folder": STR,
                "messages": array(closed({"from": STR, "subject": STR, "received_at": STR, "unread": BOOL})),
            }
        ),
        capability="read your emails",
        sample_args=_inbox_args,
        respond=_inbox_respond,
        summarize=_inbox_summary,
        train_phrasings=(
            "Show me my[ {limit}] latest [{unread_only}]emails[ in {folder}].",
            "Any new [{unread_only}]mail[ in my {folder} folder]?[ Show at most {limit}.]",
            "Check my[ {folder}] mailbox for [{unread_only}]messages[, up to {limit}].",
        ),
        test_phrasings=(
            "What [{unread_only}]emails are waiting for me[ in {folder}]?[ Just the top {limit}.]",
            "Read out my recent [{unread_only}]messages[ from the {folder} folder][, {limit} max].",
        ),
        surface_overrides={"unread_only": _unread_surface},
    ),
)


def _email_found_contact(first: Args, response: Response, rng: random.Random) -> tuple[Args, list[str]]:
    args: Args = {
        "to": response["contacts"][0]["email"],
        "subject": pick(rng, EMAIL_SUBJECTS),
        "body": pick(rng, EMAIL_BODIES),
    }
    return args, ["to"]


def _text_found_contact(first: Args, response: Response, rng: random.Random) -> tuple[Args, list[str]]:
    return {"phone_number": response["contacts"][0]["phone"], "message": pick(rng, SMS_TEXTS)}, ["phone_number"]


CHAINS = (
    ChainSpec(
        first="find_contact",
        second="send_email",
        link=_email_found_contact,
        train_phrasings=(
            'Email {name} with the subject "{subject}" saying: {body}',
            "Look up {name}'s address and send them an email. Subject: {subject}. Message: {body}",
            'Send {name} an email about "{subject}": {body}',
        ),
        test_phrasings=(
            'Get in touch with {name} by email, subject {subject}, and say "{body}"',
            'I don\'t remember {name}\'s address. Please email them "{body}" under the subject "{subject}".',
        ),
    ),
    ChainSpec(
        first="find_contact",
        second="send_sms",
        link=_text_found_contact,
        train_phrasings=(
            'Text {name}: "{message}"',
            'Find {name}\'s number and send them an SMS saying "{message}"',
            "Send a text message to {name}: {message}",
        ),
        test_phrasings=(
            "Look up {name} and shoot them a text: {message}",
            'Let {name} know by SMS that "{message}"',
        ),
    ),
)
