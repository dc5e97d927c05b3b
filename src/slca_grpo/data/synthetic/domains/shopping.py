"""Shopping tools: product search, cart, orders and parcel tracking."""

from __future__ import annotations

import random

from slca_grpo.data.synthetic.spec import (
    BOOL,
    DATE,
    INT,
    NUM,
    STR,
    Args,
    CatalogueTool,
    ChainSpec,
    Response,
    array,
    closed,
    enum_of,
    integer,
    maybe,
    number,
    obj,
    string,
)
from slca_grpo.data.synthetic.values import (
    BRANDS,
    CARRIERS,
    CITY_NAMES,
    ORDER_STATUSES,
    PRODUCT_CATEGORIES,
    PRODUCTS,
    ValuePool,
    iso_date,
    make_id,
    money,
    pick,
    price_str,
)

SORT_ORDERS = ("relevance", "price_low_to_high", "rating")
PARCEL_STATUSES = ("label_created", "in_transit", "out_for_delivery", "delivered", "exception")
# Completes "I want to cancel it because I ...".
CANCEL_REASONS: ValuePool[str] = ValuePool(
    (
        "ordered by mistake",
        "found a better price",
        "no longer need it",
        "changed my mind",
        "picked the wrong size",
        "bought it in a shop instead",
        "ordered the wrong colour",
        "got one as a gift",
        "was charged twice",
        "can't wait that long for delivery",
        "want a different model",
        "moved to a new address",
    )
)


def _order_id(rng: random.Random) -> str:
    return make_id("ORD-", rng)


# --- search_products ---


def _search_args(rng: random.Random, with_options: bool = True) -> Args:
    query, category, typical = pick(rng, PRODUCTS)
    args: Args = {"query": query}
    if with_options and maybe(rng, 0.3):
        args["category"] = category
    if with_options and maybe(rng, 0.3):
        args["max_price"] = float(round(typical * rng.uniform(1.0, 1.6)))
    if with_options and maybe(rng, 0.25):
        args["sort_by"] = pick(rng, SORT_ORDERS)
    return args


def _search_respond(args: Args, rng: random.Random) -> Response:
    typical = next((p[2] for p in PRODUCTS.all if p[0] == args["query"]), 50.0)
    ceiling = float(args.get("max_price", typical * 1.6))
    products = []
    for brand in rng.sample(list(BRANDS), rng.randint(2, 3)):
        products.append(
            {
                "product_id": make_id("PR-", rng),
                "name": f"{brand} {args['query']}",
                "price": money(rng.uniform(0.55, 1.0) * ceiling),
                "currency": "USD",
                "rating": round(rng.uniform(3.0, 5.0), 1),
            }
        )
    order = args.get("sort_by", "relevance")
    if order == "price_low_to_high":
        products.sort(key=lambda p: p["price"])
    elif order == "rating":
        products.sort(key=lambda p: -p["rating"])
    return {"query": args["query"], "products": products}


def _search_summary(args: Args, r: Response) -> str:
    listing = "; ".join(
        f"{p['name']} ({p['product_id']}) at {price_str(p['price'], p['currency'])}, rated {p['rating']}"
        for p in r["products"]
    )
    return f'Top results for "{r["query"]}": {listing}.'


# --- add_to_cart ---


def _cart_args(rng: random.Random) -> Args:
    args: Args = {"product_id": make_id("PR-", rng)}
    if maybe(rng, 0.4):
        args["quantity"] = rng.randint(2, 5)
    return args


def _cart_respond(args: Args, rng: random.Random) -> Response:
    quantity = int(args.get("quantity", 1))
    return {
        "cart_id": make_id("CART-", rng),
        "product_id": args["product_id"],
        "quantity": quantity,
        "items_in_cart": quantity + rng.randint(0, 4),
        "status": "added",
    }


def _cart_summary(args: Args, r: Response) -> str:
    return f"Added {r['quantity']} x {r['product_id']} to cart {r['cart_id']}; it now holds {r['items_in_cart']} items."


# --- get_order_status ---


def _order_args(rng: random.Random) -> Args:
    return {"order_id": _order_id(rng)}


def _order_respond(args: Args, rng: random.Random) -> Response:
    return {
        "order_id": args["order_id"],
        "status": pick(rng, ORDER_STATUSES),
        "carrier": pick(rng, CARRIERS),
        "estimated_delivery": iso_date(rng),
    }


def _order_summary(args: Args, r: Response) -> str:
    return (
        f"Order {r['order_id']} is {r['status'].replace('_', ' ')}, shipped with {r['carrier']}; "
        f"estimated delivery {r['estimated_delivery']}."
    )


# --- track_package ---


def _track_args(rng: random.Random) -> Args:
    args: Args = {"tracking_number": f"1Z{rng.randrange(10**9, 10**10)}"}
    if maybe(rng, 0.4):
        args["carrier"] = pick(rng, CARRIERS)
    return args


def _track_respond(args: Args, rng: random.Random) -> Response:
    return {
        "tracking_number": args["tracking_number"],
        "carrier": args.get("carrier", pick(rng, CARRIERS)),
        "status": pick(rng, PARCEL_STATUSES),
        "location": pick(rng, CITY_NAMES),
        "last_update": iso_date(rng),
    }


def _track_summary(args: Args, r: Response) -> str:
    return (
        f"Package {r['tracking_number']} ({r['carrier']}) is {r['status'].replace('_', ' ')}, last seen in "
        f"{r['location']} on {r['last_update']}."
    )


# --- cancel_order ---


def _cancel_args(rng: random.Random) -> Args:
    args: Args = {"order_id": _order_id(rng)}
    if maybe(rng, 0.4):
        args["reason"] = pick(rng, CANCEL_REASONS)
    return args


def _cancel_respond(args: Args, rng: random.Random) -> Response:
    return {
        "order_id": args["order_id"],
        "cancelled": True,
        "refund_amount": money(rng.uniform(8, 300)),
        "currency": "USD",
    }


def _cancel_summary(args: Args, r: Response) -> str:
    return f"Order {r['order_id']} is cancelled; {price_str(r['refund_amount'], r['currency'])} will be refunded."


TOOLS = (
    CatalogueTool(
        name="search_products",
        domain="shopping",
        description="Search the online store's product catalogue.",
        parameters=obj(
            {
                "query": string("What to search for"),
                "category": string("Product category", enum=PRODUCT_CATEGORIES),
                "max_price": number("Maximum price in USD", minimum=0),
                "sort_by": string("Result order (default relevance)", enum=SORT_ORDERS),
            },
            required=("query",),
        ),
        returns=closed(
            {
                "query": STR,
                "products": array(
                    closed({"product_id": STR, "name": STR, "price": NUM, "currency": STR, "rating": NUM})
                ),
            }
        ),
        capability="search for products",
        sample_args=_search_args,
        respond=_search_respond,
        summarize=_search_summary,
        train_phrasings=(
            "Search the store for {query}[ in {category}][ under {max_price} dollars][, sorted by {sort_by}].",
            "I'm looking for {query}[ (category: {category})][, max {max_price} USD]. What do you have?[ Sort by {sort_by}.]",
            "Show me {query}[ from the {category} section][ that cost at most {max_price} dollars][ ordered by {sort_by}].",
            "Find {query} for me[, budget {max_price} USD][, {category} category].",
        ),
        test_phrasings=(
            "Do you sell {query}?[ Keep it under {max_price} USD.][ Look in {category}.][ Order them by {sort_by}.]",
            "Browse the shop for {query}[ within {category}][ priced up to {max_price} dollars][, {sort_by} first].",
        ),
    ),
    CatalogueTool(
        name="add_to_cart",
        domain="shopping",
        description="Add a product to the shopping cart by its product_id.",
        parameters=obj(
            {
                "product_id": string("Product identifier, e.g. 'PR-4KD92A'"),
                "quantity": integer("How many (default 1)", minimum=1, maximum=20),
            },
            required=("product_id",),
        ),
        returns=closed({"cart_id": STR, "product_id": STR, "quantity": INT, "items_in_cart": INT, "status": STR}),
        capability="add products to your cart",
        sample_args=_cart_args,
        respond=_cart_respond,
        summarize=_cart_summary,
        train_phrasings=(
            "Add {product_id} to my cart[, quantity {quantity}].",
            "Put[ {quantity} of] product {product_id} in the cart.",
            "Please add item {product_id} to my basket[ ({quantity} units)].",
        ),
        test_phrasings=(
            "I'll take {product_id}[, {quantity} pieces]. Add it to the cart.",
            "Throw {product_id} into my shopping cart[, {quantity} of them].",
        ),
    ),
    CatalogueTool(
        name="get_order_status",
        domain="shopping",
        description="Get the status and estimated delivery date of an order.",
        parameters=obj({"order_id": string("Order number, e.g. 'ORD-8F3K2L'")}, required=("order_id",)),
        returns=closed(
            {"order_id": STR, "status": enum_of(ORDER_STATUSES), "carrier": STR, "estimated_delivery": DATE}
        ),
        capability="check order status",
        sample_args=_order_args,
        respond=_order_respond,
        summarize=_order_summary,
        train_phrasings=(
            "Where is my order {order_id}?",
            "What's the status of order {order_id}?",
            "Has order {order_id} shipped yet?",
            "When will order {order_id} arrive?",
        ),
        test_phrasings=(
            "Any news on my purchase {order_id}?",
            "I ordered something a while ago ({order_id}). Is it on its way?",
        ),
        parallel_slot="order_id",
        parallel_values=lambda rng, n, base: [_order_id(rng) for _ in range(n)],
    ),
    CatalogueTool(
        name="track_package",
        domain="shopping",
        description="Track a parcel by its carrier tracking number.",
        parameters=obj(
            {
                "tracking_number": string("Carrier tracking number"),
                "carrier": string("Shipping carrier", enum=CARRIERS),
            },
            required=("tracking_number",),
        ),
        returns=closed(
            {
                "tracking_number": STR,
                "carrier": enum_of(CARRIERS),
                "status": enum_of(PARCEL_STATUSES),
                "location": STR,
                "last_update": DATE,
            }
        ),
        capability="track parcels",
        sample_args=_track_args,
        respond=_track_respond,
        summarize=_track_summary,
        train_phrasings=(
            "Track package {tracking_number}[ with {carrier}].",
            "Where is my parcel {tracking_number}?[ It's a {carrier} shipment.]",
            "What's the tracking status of {tracking_number}[ ({carrier})]?",
        ),
        test_phrasings=(
            "I have a[ {carrier}] tracking number, {tracking_number}. Where's the box now?",
            "Follow up on shipment {tracking_number}[ sent via {carrier}].",
        ),
    ),
    CatalogueTool(
        name="cancel_order",
        domain="shopping",
        description="Cancel an order that has not been delivered and refund it.",
        parameters=obj(
            {
                "order_id": string("Order number, e.g. 'ORD-8F3K2L'"),
                "reason": string("Why the order is cancelled"),
            },
            required=("order_id",),
        ),
        returns=closed({"order_id": STR, "cancelled": BOOL, "refund_amount": NUM, "currency": STR}),
        capability="cancel orders",
        sample_args=_cancel_args,
        respond=_cancel_respond,
        summarize=_cancel_summary,
        train_phrasings=(
            "Cancel order {order_id}[, reason: {reason}].",
            "Please cancel my order {order_id}.[ I {reason}.]",
            "I want to cancel {order_id}[ because I {reason}].",
        ),
        test_phrasings=(
            "Scrap purchase {order_id} and refund me[; the reason: {reason}].",
            "Order {order_id} is no longer wanted. Call it off[ ({reason})].",
        ),
    ),
)


def _add_first_result(first: Args, response: Response, rng: random.Random) -> tuple[Args, list[str]]:
    args: Args = {"product_id": response["products"][0]["product_id"]}
    if maybe(rng, 0.35):
        args["quantity"] = rng.randint(2, 4)
    return args, ["product_id"]


CHAINS = (
    ChainSpec(
        first="search_products",
        second="add_to_cart",
        link=_add_first_result,
        first_args=lambda rng: _search_args(rng, with_options=False),
        train_phrasings=(
            "Search for {query} and add the top result to my cart[, quantity {quantity}].",
            "Find {query} in the store and put the first result in my basket[ ({quantity} units)].",
            "Look up {query} and add whatever comes up first to the cart[, {quantity} of them].",
        ),
        test_phrasings=(
            "I want {query}: take the very first search hit and add it to my cart[ ({quantity} pieces)].",
            "Grab the leading search result for {query} and drop it in my cart[, quantity {quantity}].",
        ),
    ),
)
