"""Phrasings that are not tied to one tool: system prompts, how parallel requests are joined,
requests no catalogue tool can serve, and the wording of refusals.

Material used to *ask* comes in a train and a test list so the test split can use phrasings the
model never saw in training. Answers (refusals) are shared: they are what the model should say.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from slca_grpo.data.synthetic.values import pick, spoken_list

SYSTEM_PROMPTS = (
    "You are a helpful assistant with access to tools. Call a tool when it helps; otherwise answer directly.",
    "You are a concise assistant. Use the provided functions when they are needed.",
    "You help users with everyday tasks using the available tools. If no tool fits, say so politely.",
)

# Several requests asked at once (parallel calls to different tools): an opening and a joiner.
PARALLEL_OPENINGS = {
    "train": ("", "A few things. ", "Can you help me with this? "),
    "test": ("I have some requests. ", "Quick list for you: "),
}
PARALLEL_JOINERS = {
    "train": (" ", " Also: ", "\n"),
    "test": (" Additionally: ", " Plus: "),
}

# Requests for actions no tool in the catalogue performs, with the capability they would need.
OUT_OF_SCOPE = {
    "train": (
        ("Call me a taxi to the airport.", "call a taxi"),
        ("Play some relaxing jazz in the living room.", "play music"),
        ("Order a large pepperoni pizza for delivery.", "order food delivery"),
        ("Pay my phone bill for this month.", "pay bills"),
        ("Post this photo to my Instagram account.", "post on social media"),
        ("Renew my library books, please.", "renew library books"),
        ("Start the washing machine on the eco program.", "run household appliances"),
        ("Buy me a lottery ticket for Friday's draw.", "buy lottery tickets"),
        ("Find a plumber near me who can come today.", "find local tradespeople"),
        ("Stream tonight's football match on the TV.", "stream video"),
        ("Check my blood pressure readings from this week.", "read health data"),
        ("Fill in my tax return for me.", "file tax returns"),
        ("Print the boarding pass I got by email.", "print documents"),
        ("Order more printer ink from the office supplier.", "order office supplies"),
        ("Record my favourite TV show tonight at 9.", "record TV shows"),
        ("Vacuum the kitchen floor with the robot cleaner.", "control the robot vacuum"),
    ),
    "test": (
        ("Hail me a ride to the train station right now.", "book rides"),
        ("Put on my workout playlist.", "play music"),
        ("Apply for the marketing manager job I saw online.", "submit job applications"),
        ("Top up my transit card with 20 dollars.", "top up transit cards"),
        ("Turn on the sprinklers in the garden.", "control garden sprinklers"),
        ("Sign the PDF contract that's in my downloads.", "sign documents"),
    ),
}

REFUSALS = (
    "I'm sorry, but I can't {capability}: none of the tools available to me can do that. "
    "I can {offered} if that helps.",
    "Unfortunately I'm not able to {capability} with the tools I have here. What I can do is {offered}.",
    "Sorry, there's no tool here that lets me {capability}. I can only {offered}.",
)


def refusal(capability: str, offered_capabilities: Sequence[str], rng: random.Random) -> str:
    """A polite answer that no available tool can do what was asked, naming what the tools can do."""
    offered = spoken_list(list(dict.fromkeys(offered_capabilities))) or "chat with you"
    return pick(rng, REFUSALS).format(capability=capability, offered=offered)
