"""Malformed input that Python's and DuckDB's parsers would crash on, as one-line errors.

``loads`` is ``json.loads`` for user input: JSON nested thousands deep (``RecursionError``),
integers longer than Python's 4,300-digit conversion limit (``ValueError``) and lone UTF-16
surrogates (``"\\ud800"``, which no UTF-8 file can hold) become ``InvalidInput`` naming
where the input came from; a plain syntax error stays ``json.JSONDecodeError`` for the
caller to word.

``check_text`` (a string that is not valid Unicode) and the stored form of a payload
(``payload_json``: secrets masked, integers within BIGINT) are the store's
(``ledger.store.payloads``): every writer passes there.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ledger.errors import InvalidInput

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def loads(text: str | bytes, where: str) -> Any:
    """``json.loads(text)`` for user input; ``where`` (``file:line``) names it in errors.

    Raises:
        json.JSONDecodeError: not JSON (the caller words it with line and column).
        InvalidInput: nested too deeply, an integer too long to convert, or a lone surrogate.
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise InvalidInput(f"{where}: JSON nested too deeply") from None
    except ValueError as exc:  # "Exceeds the limit (4300 digits) for integer string conversion"
        raise InvalidInput(f"{where}: {str(exc).split(';')[0]}") from None
    if isinstance(text, str) and _SURROGATE_ESCAPE.search(text):
        # imported here: the store's package brings DuckDB, which parsing input does not need
        from ledger.store.payloads import check_text

        check_text(value, where)
    return value
