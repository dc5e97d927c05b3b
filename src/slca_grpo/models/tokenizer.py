"""A small byte-level BPE tokenizer trained on the synthetic corpus (no download).

Special tokens (stripped by ``decode(skip_special_tokens=True)``): ``<|im_start|>``, ``<|im_end|>``
and ``<|endoftext|>`` (eos and pad). The tool and reasoning tags are single *added* tokens that
are kept when decoding, so a decoded response still shows its ``<tool_call>`` blocks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from slca_grpo.chat.jinja import hermes_chat_template
from slca_grpo.chat.parser import (
    THINK_CLOSE,
    THINK_OPEN,
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    TOOL_RESPONSE_CLOSE,
    TOOL_RESPONSE_OPEN,
)
from slca_grpo.chat.template import IM_END, IM_START

EOS_TOKEN = "<|endoftext|>"
SPECIAL_TOKENS = (EOS_TOKEN, IM_START, IM_END)
TAG_TOKENS = (
    TOOL_CALL_OPEN,
    TOOL_CALL_CLOSE,
    TOOL_RESPONSE_OPEN,
    TOOL_RESPONSE_CLOSE,
    THINK_OPEN,
    THINK_CLOSE,
    "<tools>",
    "</tools>",
)
DEFAULT_VOCAB_SIZE = 4096

# How text is cut into pieces before BPE merges (merges never cross a piece boundary).
# "whitespace": a word carries its leading space and punctuation, so JSON boilerplate such as
#   '{"type":' becomes one token (short sequences, but ' Auckland' in a request and '"Auckland"' in a
#   call are different tokens).
# "words": letters, digits and everything else are apart; a lowercase word keeps its leading space
#   (prose stays short) and a JSON key is one piece with its quotes and colon. A value written
#   with a capital, a digit or a symbol first is then the same tokens in a request and in a call,
#   and every digit is its own token, so ids and numbers can be copied token by token
#   (~1.7x the tokens of "whitespace" on the synthetic suite).
# "words-nl": "words", with every newline a piece of its own. Under "words" a newline joins the
#   symbols after it ('\n{' is one token), so an answer that starts with a symbol is a token the
#   model never sees after the chat template's generation prompt, which ends in '\n': a reader
#   trained on '\n{"product": …}' could not start a JSON answer from that prompt.
PRETOKENIZERS = {
    "whitespace": r" ?[^\s]+|\s+",
    "words": r'"[^\W\d]+":|\d| ?[a-z][^\W\d]*|[^\W\d]+|(?:(?!"[^\W\d]+":)[^\w])+',
    "words-nl": r'\n|"[^\W\d]+":|\d| ?[a-z][^\W\d]*|[^\W\d]+|(?:(?!"[^\W\d]+":)[^\w\n])+',
}


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    min_frequency: int = 2,
    model_max_length: int = 2048,
    pretokenizer: str = "whitespace",
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on ``texts`` and wrap it for ``transformers``.

    Every byte is in the base alphabet, so any text encodes and ``decode(encode(text)) == text``.
    The tokenizer carries the Hermes chat template (see :func:`hermes_chat_template`).
    """
    reserved = len(SPECIAL_TOKENS) + len(TAG_TOKENS) + len(pre_tokenizers.ByteLevel.alphabet())
    if not isinstance(vocab_size, int) or vocab_size < reserved:
        raise ValueError(
            f"vocab_size must be an int of at least {reserved} (bytes + special tokens), got {vocab_size!r}"
        )
    if pretokenizer not in PRETOKENIZERS:
        raise ValueError(f"unknown pretokenizer {pretokenizer!r}; choose one of {', '.join(PRETOKENIZERS)}")
    texts = list(texts)
    if not texts:
        raise ValueError("train_tokenizer needs at least one text")
    model = Tokenizer(models.BPE())
    # "whitespace" keeps rendered tasks ~2.3x shorter than the GPT-2 split, which matters when
    # every token costs CPU time; "words" trades length for copyable values (see PRETOKENIZERS).
    model.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZERS[pretokenizer]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    model.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Train on the pieces between markers, exactly as encoding will see them (markers are cut out
    # before pre-tokenisation), so merges are spent on content rather than on tags.
    marker_pattern = re.compile("|".join(re.escape(m) for m in (*SPECIAL_TOKENS, *TAG_TOKENS)))

    def pieces() -> Iterator[str]:
        for text in texts:
            yield from (piece for piece in marker_pattern.split(text) if piece)

    model.train_from_iterator(pieces(), trainer=trainer)
    model.add_tokens([AddedToken(tag, special=False, normalized=False) for tag in TAG_TOKENS])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=model,
        eos_token=EOS_TOKEN,
        pad_token=EOS_TOKEN,
        additional_special_tokens=[IM_START, IM_END],
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = hermes_chat_template()
    return tokenizer
