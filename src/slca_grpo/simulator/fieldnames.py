"""Field-name classification: which kind of value a field called ``check_in`` or ``price`` holds.

Ordered regular-expression rules over the snake-case name; the first match wins, so specific
rules (``total_results`` → count) come before general ones (``total`` → money).
"""

from __future__ import annotations

import re
from functools import lru_cache

from slca_grpo.simulator.words import snake

_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(p), c)
    for p, c in (
        (r"(^|_)uuid$|^guid$", "uuid"),
        (r"(^|_)e_?mail(_address)?$|^e_?mail", "email"),
        (r"phone|mobile|telephone|(^|_)fax$|(^|_)tel$", "phone"),
        (r"image|photo|avatar|thumbnail|logo|picture|icon_url", "image_url"),
        (r"(^|_)(url|link|website|homepage|href|uri|webpage)$", "url"),
        (r"(^|_)ip(_address)?$", "ip"),
        (r"(^|_)id$", "id"),
        (r"^(first|given)_?name$|^fname$", "first_name"),
        (r"^(last|family)_?name$|^lname$|^surname$", "last_name"),
        (r"user_?name|(^|_)handle$|screen_name|(^|_)login$", "username"),
        (r"time_?zone|(^|_)tz$", "timezone"),
        (r"flight_(number|no|num|code)$", "flight_number"),
        (r"(^|_)(zip|postal|post)_?(code)?$|postcode", "zip"),
        (r"country_code$", "country_code"),
        (r"(^|_)currency(_code)?$|_currency$", "currency"),
        (r"language_code$|(^|_)(lang|locale)$", "language_code"),
        (r"(^|_)languages?$|_language$", "language"),
        (
            (
                r"_at$|timestamp|date_?time|^(created|updated|modified|published|posted|observed|sent|issued)"
                r"(_on)?$|^last_(updated|modified)$|^as_of$|(departure|arrival|start|end|pickup|dropoff)_time$"
            ),
            "datetime",
        ),
        (r"(^|_)dates?$|_date$|^date_|birth|(^|_)dob$|deadline|(^|_)due$|expir|^check_?(in|out)$", "date"),
        (r"(^|_)time$|^(opens|closes)$|(opening|closing)_time$", "time"),
        (r"(^|_)year", "year"),
        (r"(^|_)month$", "month"),
        (r"weekday|day_of_week", "weekday"),
        (
            (
                r"duration|minutes|(^|_)mins?$|seconds|(^|_)secs?$|hours|(^|_)hrs?$|(^|_)eta$|travel_time"
                r"|prep_time|cook_time|runtime"
            ),
            "duration",
        ),
        (r"temperature|(^|_)temp(_|$)|feels_like|dew_?point|^(high|low)$", "temperature"),
        (r"humidity", "humidity"),
        (r"wind", "wind"),
        (r"pressure", "pressure"),
        (r"visibility", "visibility"),
        (r"(^|_)uv", "uv"),
        (r"precip|rainfall|(^|_)rain|snow", "precipitation"),
        (r"(^|_)(lat|latitude)$", "latitude"),
        (r"(^|_)(lng|lon|long|longitude)$", "longitude"),
        (r"change_?(percent|pct)|percent_?change", "change_percent"),
        (r"percent|percentage|(^|_)pct$|probability|chance|discount|occupancy|battery", "percent"),
        (r"exchange_rate|conversion_rate|(^|_)rate$|fx_rate", "rate"),
        (
            (
                r"(^|_)(count|num|number_of|total_results|total_count|results_count|quantity|qty|stock"
                r"|inventory|seats|rooms|guests|adults|children|passengers|followers|likes|views|votes"
                r"|nights|servings|stops|capacity|available_rooms|available_seats|seats_available"
                r"|tickets_available|copies|units|total_items|employees|review_count)$|^num_|_count$"
            ),
            "count",
        ),
        (r"(^|_)(page|page_number)$", "page"),
        (r"(^|_)(limit|per_page|page_size|max_results|top_k|top_n)$", "limit"),
        (r"salary|income|revenue", "salary"),
        (r"balance|budget|credit_limit", "balance"),
        (r"market_cap", "big_money"),
        (r"(^|_)(fee|tax|tip|shipping|surcharge|deposit)(_amount|_cost)?$", "small_money"),
        (r"price|cost|amount|total|fare|subtotal|charge|refund|(^|_)paid_amount$", "money"),
        (r"(^|_)volume$", "volume"),
        (r"(^|_)change$", "change"),
        (r"rating|stars", "rating"),
        (r"score", "score"),
        (r"(^|_)age$", "age"),
        (r"population", "population"),
        (r"distance|_km$|_miles$|_mi$|mileage", "distance"),
        (r"weight|_kg$|_lbs?$", "weight"),
        (r"(^|_)(height|width|depth|length)(_cm|_m)?$", "dimension"),
        (r"elevation|altitude", "elevation"),
        (r"speed", "speed"),
        (r"(^|_)size(_bytes)?$|bytes|file_size", "size_bytes"),
        (r"calorie", "calories"),
        (r"^(success|successful|ok|valid|succeeded)$", "true"),
        (
            (
                r"^(is|has|can|should|allow|allows|enable|include|includes|supports|requires)_|(^|_)(available"
                r"|in_stock|active|verified|confirmed|open_now|refundable|completed|paid|visible|public"
                r"|private|enabled|archived|starred|favorite|direct|nonstop|instant)$"
            ),
            "boolean",
        ),
        (r"(^|_)status$", "status"),
        (r"priority|severity|urgency", "priority"),
        (r"(^|_)role$", "role"),
        (r"(^|_)(mode|travel_mode|transport)$", "travel_mode"),
        (r"payment_method|(^|_)method$", "payment_method"),
        (r"colou?r", "color"),
        (r"(^|_)units?$", "unit"),
        (r"cuisine", "cuisine"),
        (r"genre", "genre"),
        (r"(^|_)(category|categories|type|kind|department|section|class)$", "category"),
        (r"(^|_)(tags|keywords|labels|topics)$", "tags"),
        (r"amenit|features|facilities", "amenities"),
        (r"ingredient", "ingredients"),
        (r"(^|_)topic$", "topic"),
        (r"job_title|position|occupation|(^|_)profession$", "job_title"),
        (r"airline", "airline"),
        (r"airport|iata", "airport"),
        (
            (
                r"company|organi[sz]ation|employer|brand|manufacturer|vendor|merchant|(^|_)store$|(^|_)shop$"
                r"|seller|provider|(^|_)bank$|carrier|agency|studio"
            ),
            "company",
        ),
        (r"(^|_)(symbol|ticker)$", "ticker"),
        (
            (
                r"(^|_)(city|town|origin|destination|location|from_city|to_city|departure_city"
                r"|arrival_city|place|hometown|locality)$"
            ),
            "city",
        ),
        (r"country", "country"),
        (r"(^|_)(state|region|province|county)$", "region"),
        (r"address|street|(^|_)addr$", "address"),
        (
            (
                r"(^|_)(author|artist|director|assignee|owner|organi[sz]er|host|driver|manager|instructor"
                r"|teacher|doctor|agent|sender|recipient|creator|reviewer|speaker|composer|writer|customer"
                r"|passenger|guest|user|contact|person|employee|attendee|chef)(_name)?$|^full_?name$"
            ),
            "person",
        ),
        (r"(^|_)name$|_name$", "name"),
        (r"(^|_)(title|headline|subject|album)$|_title$", "title"),
        (r"(^|_)venue$", "venue"),
        (r"(^|_)make$", "car_make"),
        (r"(^|_)model$", "car_model"),
        (r"(^|_)(source|publisher)$", "news_source"),
        (r"(^|_)seat(_number)?$", "seat"),
        (r"(^|_)gate$", "gate"),
        (r"(^|_)terminal$", "terminal"),
        (r"room_type|(^|_)room$", "room_type"),
        (r"cabin|seat_class|travel_class|fare_class", "seat_class"),
        (r"mime|content_type|file_type|(^|_)format$", "mime"),
        (r"file_?name", "file_name"),
        (r"(^|_)isbn$", "isbn"),
        (r"(^|_)sku$", "sku"),
        (r"version", "version"),
        (r"token|api_key|secret|hash|checksum|signature|password", "token"),
        (
            r"(^|_)(code|confirmation|reference|ref|tracking|coupon|voucher|pnr)$|_code$|_number$|_ref$",
            "code",
        ),
        (r"(^|_)(condition|conditions|weather|sky|forecast)$", "condition"),
        (
            (
                r"(^|_)(description|summary|details|overview|bio|about|snippet|abstract|notes?|comment|review"
                r"|content|body|text|message|answer|instructions|remarks|reason|feedback|excerpt|caption)$"
            ),
            "text",
        ),
        (r"(^|_)(items|line_items|order_items)$", "line_items"),
        (r"(^|_)(attendees|participants|recipients|members|invitees|cc)$", "email_list"),
    )
]


@lru_cache(maxsize=8192)
def classify(name: str) -> str | None:
    """The value category of a field name, or None when no rule knows it."""
    key = snake(name)
    for pattern, category in _RULES:
        if pattern.search(key):
            return category
    return None
