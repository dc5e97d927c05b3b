"""Finance tools: stock quotes, ticker lookup, currency conversion, bank accounts."""

from __future__ import annotations

import random

from slca_grpo.data.synthetic.spec import (
    DATE,
    NUM,
    STR,
    Args,
    CatalogueTool,
    ChainSpec,
    Response,
    closed,
    enum_of,
    maybe,
    number,
    obj,
    string,
)
from slca_grpo.data.synthetic.values import (
    ACCOUNT_TYPES,
    COMPANIES,
    CURRENCIES,
    EXCHANGES,
    USD_RATES,
    ValuePool,
    iso_date,
    make_id,
    money,
    pick,
    pick_distinct,
    price_str,
)

# Tickers split like their companies (same positions); look-ups by name or ticker use every company.
SYMBOLS: ValuePool[str] = ValuePool(symbol for _, symbol in COMPANIES.all)
_EXCHANGE_OF = {symbol: EXCHANGES[i % len(EXCHANGES)] for i, (_, symbol) in enumerate(COMPANIES.all)}
TRANSFER_NOTES: ValuePool[str] = ValuePool(
    (
        "rent",
        "holiday savings",
        "emergency fund",
        "monthly budget",
        "car repairs",
        "school fees",
        "wedding gift",
        "tax bill",
        "new laptop",
        "gym membership",
        "home repairs",
        "birthday present",
    )
)


def _rate(base: str, quote: str) -> float:
    return round(USD_RATES[quote] / USD_RATES[base], 4)


def _amount(rng: random.Random) -> float:
    return float(pick(rng, (20, 50, 75, 100, 150, 200, 250, 500, 1000, 1200, 2500)))


# --- get_stock_price ---


def _price_args(rng: random.Random) -> Args:
    return {"symbol": pick(rng, SYMBOLS)}


def _price_respond(args: Args, rng: random.Random) -> Response:
    return {
        "symbol": args["symbol"],
        "price": money(rng.uniform(4, 480)),
        "currency": "USD",
        "change_percent": round(rng.uniform(-6, 6), 2),
    }


def _price_summary(args: Args, r: Response) -> str:
    return f"{r['symbol']} is trading at {price_str(r['price'], r['currency'])}, {r['change_percent']:+.2f}% today."


# --- lookup_stock_symbol ---


def _lookup_args(rng: random.Random) -> Args:
    return {"company_name": pick(rng, COMPANIES)[0]}


def _lookup_respond(args: Args, rng: random.Random) -> Response:
    symbol = next((s for name, s in COMPANIES.all if name.lower() == str(args["company_name"]).strip().lower()), None)
    if symbol is None:  # an unknown company still gets a plausible ticker
        letters = "".join(ch for ch in str(args["company_name"]).upper() if ch.isalpha())
        symbol = (letters[:4] or "XXXX").ljust(4, "X")
    return {"company_name": args["company_name"], "symbol": symbol, "exchange": _EXCHANGE_OF.get(symbol, "NYSE")}


def _lookup_summary(args: Args, r: Response) -> str:
    return f"{r['company_name']} trades under the ticker {r['symbol']} on the {r['exchange']}."


# --- convert_currency ---


def _convert_args(rng: random.Random) -> Args:
    source, target = pick_distinct(rng, CURRENCIES, 2)
    return {"amount": _amount(rng), "from_currency": source, "to_currency": target}


def _convert_respond(args: Args, rng: random.Random) -> Response:
    rate = _rate(args["from_currency"], args["to_currency"])
    return {
        "amount": args["amount"],
        "from_currency": args["from_currency"],
        "to_currency": args["to_currency"],
        "rate": rate,
        "converted_amount": money(float(args["amount"]) * rate),
    }


def _convert_summary(args: Args, r: Response) -> str:
    return (
        f"{r['amount']:.2f} {r['from_currency']} is {price_str(r['converted_amount'], r['to_currency'])} "
        f"at a rate of {r['rate']}."
    )


# --- get_exchange_rate ---


def _rate_args(rng: random.Random) -> Args:
    base, quote = pick_distinct(rng, CURRENCIES, 2)
    return {"base_currency": base, "quote_currency": quote}


def _rate_respond(args: Args, rng: random.Random) -> Response:
    return {
        "base_currency": args["base_currency"],
        "quote_currency": args["quote_currency"],
        "rate": _rate(args["base_currency"], args["quote_currency"]),
        "date": iso_date(rng),
    }


def _rate_summary(args: Args, r: Response) -> str:
    return f"On {r['date']}, 1 {r['base_currency']} = {r['rate']} {r['quote_currency']}."


# --- get_account_balance ---


def _balance_args(rng: random.Random) -> Args:
    return {"account_type": pick(rng, ACCOUNT_TYPES)}


def _balance_respond(args: Args, rng: random.Random) -> Response:
    sign = -1 if args["account_type"] == "credit" else 1
    return {
        "account_type": args["account_type"],
        "balance": money(sign * rng.uniform(10, 9000)),
        "currency": "USD",
        "as_of": iso_date(rng),
    }


def _balance_summary(args: Args, r: Response) -> str:
    return f"Your {r['account_type']} account balance is {price_str(r['balance'], r['currency'])} as of {r['as_of']}."


# --- transfer_money ---


def _transfer_args(rng: random.Random) -> Args:
    source, target = pick_distinct(rng, ACCOUNT_TYPES[:2], 2)
    args: Args = {"from_account": source, "to_account": target, "amount": _amount(rng)}
    if maybe(rng, 0.3):
        args["note"] = pick(rng, TRANSFER_NOTES)
    return args


def _transfer_respond(args: Args, rng: random.Random) -> Response:
    return {
        "transfer_id": make_id("TR-", rng),
        "from_account": args["from_account"],
        "to_account": args["to_account"],
        "amount": args["amount"],
        "currency": "USD",
        "status": "completed",
    }


def _transfer_summary(args: Args, r: Response) -> str:
    return (
        f"Transferred {price_str(r['amount'], r['currency'])} from {r['from_account']} to {r['to_account']} "
        f"(transfer {r['transfer_id']}, {r['status']})."
    )


_CURRENCY = {"type": "string", "enum": list(CURRENCIES)}

TOOLS = (
    CatalogueTool(
        name="get_stock_price",
        domain="finance",
        description="Get the latest share price of a stock by its ticker symbol.",
        parameters=obj({"symbol": string("Ticker symbol, e.g. 'NWTR'")}, required=("symbol",)),
        returns=closed({"symbol": STR, "price": NUM, "currency": STR, "change_percent": NUM}),
        capability="get stock prices",
        sample_args=_price_args,
        respond=_price_respond,
        summarize=_price_summary,
        train_phrasings=(
            "What's the stock price of {symbol}?",
            "How is {symbol} trading today?",
            "Give me a quote for {symbol}.",
            "Current share price for ticker {symbol}, please.",
        ),
        test_phrasings=(
            "Where does {symbol} stand on the market right now?",
            "Pull up the latest {symbol} quote.",
        ),
        parallel_slot="symbol",
        parallel_values=lambda rng, n, base: pick_distinct(rng, SYMBOLS, n),
    ),
    CatalogueTool(
        name="lookup_stock_symbol",
        domain="finance",
        description="Look up the ticker symbol of a listed company by its name.",
        parameters=obj({"company_name": string("Company name")}, required=("company_name",)),
        returns=closed({"company_name": STR, "symbol": STR, "exchange": enum_of(EXCHANGES)}),
        capability="look up ticker symbols",
        sample_args=_lookup_args,
        respond=_lookup_respond,
        summarize=_lookup_summary,
        train_phrasings=(
            "What's the ticker symbol for {company_name}?",
            "Under which symbol does {company_name} trade?",
            "Look up the stock ticker of {company_name}.",
        ),
        test_phrasings=(
            "I want to invest in {company_name}. What's it called on the exchange?",
            "Find {company_name}'s ticker for me.",
        ),
        parallel_slot="company_name",
        parallel_values=lambda rng, n, base: [c[0] for c in rng.sample(list(COMPANIES), n)],
    ),
    CatalogueTool(
        name="convert_currency",
        domain="finance",
        description="Convert an amount of money from one currency to another.",
        parameters=obj(
            {
                "amount": number("Amount to convert", minimum=0),
                "from_currency": dict(_CURRENCY, description="Currency code to convert from"),
                "to_currency": dict(_CURRENCY, description="Currency code to convert to"),
            },
            required=("amount", "from_currency", "to_currency"),
        ),
        returns=closed({"amount": NUM, "from_currency": STR, "to_currency": STR, "rate": NUM, "converted_amount": NUM}),
        capability="convert currencies",
        sample_args=_convert_args,
        respond=_convert_respond,
        summarize=_convert_summary,
        train_phrasings=(
            "Convert {amount} {from_currency} to {to_currency}.",
            "How much is {amount} {from_currency} in {to_currency}?",
            "What do I get for {amount} {from_currency} if I change it into {to_currency}?",
            "{amount} {from_currency} to {to_currency}, please.",
        ),
        test_phrasings=(
            "I have {amount} in {from_currency}. What's that worth in {to_currency}?",
            "Work out the {to_currency} value of {amount} {from_currency}.",
        ),
        parallel_slot="to_currency",
        parallel_values=lambda rng, n, base: pick_distinct(
            rng, [c for c in CURRENCIES if c != base["from_currency"]], n
        ),
    ),
    CatalogueTool(
        name="get_exchange_rate",
        domain="finance",
        description="Get today's exchange rate between two currencies.",
        parameters=obj(
            {
                "base_currency": dict(_CURRENCY, description="Currency to price"),
                "quote_currency": dict(_CURRENCY, description="Currency to price it in"),
            },
            required=("base_currency", "quote_currency"),
        ),
        returns=closed({"base_currency": STR, "quote_currency": STR, "rate": NUM, "date": DATE}),
        capability="look up exchange rates",
        sample_args=_rate_args,
        respond=_rate_respond,
        summarize=_rate_summary,
        train_phrasings=(
            "What's the exchange rate from {base_currency} to {quote_currency}?",
            "How many {quote_currency} is one {base_currency} worth today?",
            "Give me the {base_currency}/{quote_currency} rate.",
        ),
        test_phrasings=(
            "Where is {base_currency} against {quote_currency} today?",
            "Quote me the current {base_currency} to {quote_currency} conversion rate.",
        ),
    ),
    CatalogueTool(
        name="get_account_balance",
        domain="finance",
        description="Get the current balance of one of your bank accounts.",
        parameters=obj({"account_type": string("Which account", enum=ACCOUNT_TYPES)}, required=("account_type",)),
        returns=closed({"account_type": STR, "balance": NUM, "currency": STR, "as_of": DATE}),
        capability="check your account balances",
        sample_args=_balance_args,
        respond=_balance_respond,
        summarize=_balance_summary,
        train_phrasings=(
            "What's the balance of my {account_type} account?",
            "How much money is in my {account_type} account?",
            "Check my {account_type} balance.",
        ),
        test_phrasings=(
            "Tell me where my {account_type} account stands.",
            "How much have I got left in {account_type}?",
        ),
        parallel_slot="account_type",
        parallel_values=lambda rng, n, base: pick_distinct(rng, ACCOUNT_TYPES, n),
    ),
    CatalogueTool(
        name="transfer_money",
        domain="finance",
        description="Transfer money between your own bank accounts.",
        parameters=obj(
            {
                "from_account": string("Account to take the money from", enum=ACCOUNT_TYPES[:2]),
                "to_account": string("Account to put the money in", enum=ACCOUNT_TYPES[:2]),
                "amount": number("Amount in USD", minimum=0),
                "note": string("Optional note on the transfer"),
            },
            required=("from_account", "to_account", "amount"),
        ),
        returns=closed(
            {"transfer_id": STR, "from_account": STR, "to_account": STR, "amount": NUM, "currency": STR, "status": STR}
        ),
        capability="move money between your accounts",
        sample_args=_transfer_args,
        respond=_transfer_respond,
        summarize=_transfer_summary,
        train_phrasings=(
            "Move {amount} dollars from {from_account} to {to_account}[ for {note}].",
            "Transfer {amount} USD from my {from_account} account to {to_account}.[ Note: {note}.]",
            "Please send {amount} dollars from {from_account} into {to_account}[, labelled {note}].",
        ),
        test_phrasings=(
            "Shift {amount} USD over from {from_account} to {to_account}[ (memo: {note})].",
            "I'd like {amount} dollars taken out of {from_account} and put into {to_account}[; it's for {note}].",
        ),
    ),
)


def _quote_found_symbol(first: Args, response: Response, rng: random.Random) -> tuple[Args, list[str]]:
    return {"symbol": response["symbol"]}, ["symbol"]


CHAINS = (
    ChainSpec(
        first="lookup_stock_symbol",
        second="get_stock_price",
        link=_quote_found_symbol,
        train_phrasings=(
            "What's the share price of {company_name}?",
            "How is {company_name} stock doing today?",
            "Find the ticker of {company_name} and tell me its current price.",
        ),
        test_phrasings=(
            "I'm curious what one share of {company_name} costs right now.",
            "Check how {company_name} is valued on the market today.",
        ),
    ),
)
