"""Random-token benchmark workloads of fixed length, reproducible from a seed.

With a tokenizer (a LOCAL path: a ``tokenizer.json`` file or a folder holding
one, or any folder ``transformers.AutoTokenizer`` reads offline) prompts are
built like sglang bench_serving's ``random-ids`` dataset: random token ids
decoded to text. Decoding and re-encoding is not always the identity, so the
text is re-encoded and trimmed until it encodes to exactly ``input_len`` tokens
(``exact_length`` is then true; ``prompt_len`` is the re-encoded count either
way). Without a tokenizer the prompt is a seeded string of random words, about
one token per word: ``exact_length`` is false and the workload's dataset says
``random-words-approx``, so nobody mistakes it for an exact-length workload.

``shared_prefix_len`` = P > 0: every prompt starts with the same P tokens (words without a
tokenizer), drawn once from the seed, and goes on with its own ``input_len - P``: a long system
prompt shared by all requests, what prefix caching reuses (sglang's ``generated-shared-prefix``
and vLLM's ``prefix_repetition`` datasets are of this kind). With a tokenizer the prompt's ids
are the prefix's followed by random ones, decoded as one text, so the prefix's text is the same
in every prompt (re-encoding may merge the one token pair at the boundary differently).

Tokenization happens here, before any timing; the benchmark loop never tokenizes.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ledger.errors import InvalidInput

#: Dataset names written to ``Workload.dataset``.
DATASET_EXACT = "random-ids"
DATASET_APPROX = "random-words-approx"

# A fixed vocabulary of short common English words: most tokenizers encode each
# as one token (with its leading space), so the prompt length is roughly the word count.
_WORDS = (
    "the of and to in is was for on are as with his they at be this from have or by one had not but "
    "what all were when we there can an your which their said if do will each about how up out them "
    "then she many some so these would other into has more her two like him see time could no make "
    "than first been its who now people my made over did down only way find use may water long little "
    "very after words called just where most know get through back much before go good new write our "
    "used me man too any day same right look think also around another came come work three word must "
    "because does part even place well such here take why things help put years different away again"
).split()


@dataclass(frozen=True)
class Prompt:
    """One request's input: ``text``, its length ``prompt_len`` in tokens, the ``output_len`` asked."""

    text: str
    prompt_len: int
    output_len: int


@dataclass(frozen=True)
class WorkloadSpec:
    """What to send: lengths in tokens, how many prompts, the seed; ``tokenizer`` a local path or None."""

    input_len: int
    output_len: int
    num_prompts: int
    seed: int = 0
    tokenizer: str | None = None
    shared_prefix_len: int = 0


@dataclass(frozen=True)
class BuiltWorkload:
    """The prompts of a spec plus whether their lengths are exact (tokenizer) or approximate."""

    spec: WorkloadSpec
    prompts: list[Prompt]
    exact_length: bool

    @property
    def dataset(self) -> str:
        """``random-ids`` (exact token lengths) or ``random-words-approx``."""
        return DATASET_EXACT if self.exact_length else DATASET_APPROX


class _Tok:
    """The two operations needed from a tokenizer, whatever library provides it."""

    def __init__(
        self,
        encode: Callable[[str], list[int]],
        decode: Callable[[Sequence[int]], str],
        vocab_size: int,
        special_ids: set[int],
    ) -> None:
        self.encode = encode
        self.decode = decode
        self.vocab_size = vocab_size
        self.special_ids = special_ids


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def load_tokenizer(path: str | Path) -> _Tok:
    """Load a tokenizer from a local path, never from a hub.

    Tries the ``tokenizers`` library on ``tokenizer.json`` first (fast, no
    transformers import), then ``transformers.AutoTokenizer`` with
    ``local_files_only=True``.

    Raises:
        ledger.errors.InvalidInput: (exit 3, one line) the path does not exist, or nothing
            could read a tokenizer there (the file's own error, first line).
    """
    p = Path(path)
    if not p.exists():
        raise InvalidInput(
            f"--tokenizer {p}: no such file or folder (a local tokenizer.json or folder is needed)"
        )
    file = p if p.is_file() else p / "tokenizer.json"
    if file.is_file():
        from tokenizers import (
            Tokenizer,
        )  # a core dependency: no transformers needed for tokenizer.json

        try:
            tok = Tokenizer.from_file(str(file))
        except Exception as exc:  # noqa: BLE001 - the Rust library raises its own exception type
            raise InvalidInput(
                f"--tokenizer {file}: not a readable tokenizer.json: {_first_line(exc)}"
            ) from None
        special = {
            tok.token_to_id(t.content) for t in tok.get_added_tokens_decoder().values() if t.special
        }
        return _Tok(
            lambda s: tok.encode(s, add_special_tokens=False).ids,
            lambda ids: tok.decode(list(ids), skip_special_tokens=False),
            tok.get_vocab_size(),
            {i for i in special if i is not None},
        )
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise InvalidInput(
            f"--tokenizer {p}: no tokenizer.json there (other formats need transformers)"
        ) from None
    try:
        hf = AutoTokenizer.from_pretrained(str(p), local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - any loader failure means "no usable tokenizer here"
        raise InvalidInput(
            f"--tokenizer {p}: no tokenizer could be read: {_first_line(exc)}"
        ) from None
    return _Tok(
        lambda s: hf.encode(s, add_special_tokens=False),
        # decode of one id sequence is one string (a list only for a batch of sequences)
        lambda ids: str(hf.decode(list(ids))),
        len(hf),
        set(hf.all_special_ids),
    )


def _exact_prompt(
    tok: _Tok, rng: random.Random, length: int, pool: list[int], head: Sequence[int] = ()
) -> tuple[str, int, bool]:
    """``head`` then random ids, decoded to text, re-encoded and trimmed (at the end) until the
    text encodes to ``length`` tokens."""
    ids = list(head) + [rng.choice(pool) for _ in range(length - len(head))]
    text = tok.decode(ids)
    for _ in range(16):
        got = tok.encode(text)
        if len(got) == length:
            return text, length, True
        if len(got) > length:
            text = tok.decode(got[:length])
        else:
            # Decoding merged tokens: append more random ids and try again.
            text = tok.decode(got + [rng.choice(pool) for _ in range(length - len(got))])
    got = tok.encode(text)
    return text, len(got), len(got) == length


def build_workload(spec: WorkloadSpec) -> BuiltWorkload:
    """Build the ``num_prompts`` prompts of ``spec``, the same for the same seed.

    Raises:
        ValueError: a length or count below 1.
        ledger.errors.InvalidInput: from ``load_tokenizer``.
    """
    if spec.input_len < 1 or spec.output_len < 1 or spec.num_prompts < 1:
        raise ValueError("input_len, output_len and num_prompts must be >= 1")
    if not 0 <= spec.shared_prefix_len < spec.input_len:
        raise ValueError("shared_prefix_len must be >= 0 and below input_len")
    rng = random.Random(spec.seed)
    if spec.tokenizer:
        tok = load_tokenizer(spec.tokenizer)
        # Tokens that decode to valid text on their own: byte-level pieces of a multi-byte
        # character decode to U+FFFD, which re-encodes as other tokens and breaks exact lengths.
        pool = [
            i
            for i in range(tok.vocab_size)
            if i not in tok.special_ids and "\ufffd" not in tok.decode([i])
        ]
        prompts, exact = [], True
        head = [rng.choice(pool) for _ in range(spec.shared_prefix_len)]
        for _ in range(spec.num_prompts):
            text, n, ok = _exact_prompt(tok, rng, spec.input_len, pool, head)
            exact = exact and ok
            prompts.append(Prompt(text, n, spec.output_len))
        return BuiltWorkload(spec, prompts, exact)
    words = [rng.choice(_WORDS) for _ in range(spec.shared_prefix_len)]
    prompts = [
        Prompt(
            " ".join(words + [rng.choice(_WORDS) for _ in range(spec.input_len - len(words))]),
            spec.input_len,
            spec.output_len,
        )
        for _ in range(spec.num_prompts)
    ]
    return BuiltWorkload(spec, prompts, False)
