"""Typed access to one parsed result object, shared by the bench importers.

Every error names where the object is (``file:line``) and the tool's own key, so a
file that looks like one format but breaks its rules is refused with one line
naming the line and field.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal, overload

from ledger.errors import InvalidInput


class FieldReader:
    """``obj`` (one JSON/YAML/CSV object) read at ``where`` (``file:line``)."""

    def __init__(self, obj: dict[str, Any], where: str) -> None:
        self.obj = obj
        self.where = where

    def error(self, key: str, problem: str) -> InvalidInput:
        """``WHERE: field 'KEY': PROBLEM``."""
        return InvalidInput(f"{self.where}: field '{key}': {problem}")

    @overload
    def number(self, key: str, *, integer: Literal[True]) -> int | None: ...
    @overload
    def number(self, key: str, *, integer: Literal[False] = False) -> float | None: ...
    @overload
    def number(self, key: str, *, integer: bool) -> float | int | None: ...
    def number(self, key: str, *, integer: bool = False) -> float | int | None:
        """The value of ``key`` as a number; ``None`` when absent, null or not finite (NaN).

        A numeric string (``"550"``, as llmperf writes some counts) is read as its number.

        Raises:
            InvalidInput: not a number, or not an integer where ``integer`` is asked.
        """
        value = self.obj.get(key)
        if value is None:
            return None
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                raise self.error(key, f"expected a number, got {json.dumps(value)[:40]}") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key, f"expected a number, got {json.dumps(value)[:40]}")
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if integer:
            if isinstance(value, float) and not value.is_integer():
                raise self.error(key, f"expected an integer, got {value}")
            return int(value)
        return float(value)

    def text(self, key: str) -> str | None:
        """The value of ``key`` as a string (``None`` when absent or null)."""
        value = self.obj.get(key)
        if value is None or isinstance(value, str):
            return value
        raise self.error(key, f"expected a string, got {json.dumps(value)[:40]}")

    def array(self, key: str) -> list[Any] | None:
        """The value of ``key`` as a list (``None`` when absent or null)."""
        value = self.obj.get(key)
        if value is None or isinstance(value, list):
            return value
        raise self.error(key, f"expected a list, got {type(value).__name__}")

    def mapping(self, key: str) -> dict[str, Any] | None:
        """The value of ``key`` as an object (``None`` when absent or null)."""
        value = self.obj.get(key)
        if value is None or isinstance(value, dict):
            return value
        raise self.error(key, f"expected an object, got {json.dumps(value)[:40]}")

    def sub(self, key: str) -> FieldReader:
        """A reader of the object under ``key`` (an empty one when absent); errors name ``key.inner``."""
        return _Nested(self.mapping(key) or {}, self.where, key)


class _Nested(FieldReader):
    def __init__(self, obj: dict[str, Any], where: str, prefix: str) -> None:
        super().__init__(obj, where)
        self.prefix = prefix

    def error(self, key: str, problem: str) -> InvalidInput:
        return InvalidInput(f"{self.where}: field '{self.prefix}.{key}': {problem}")

    def sub(self, key: str) -> FieldReader:
        return _Nested(self.mapping(key) or {}, self.where, f"{self.prefix}.{key}")
