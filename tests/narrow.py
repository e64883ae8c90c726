"""Narrowing for tests: the value a test expects to be there, failing loudly where it is not."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def present(value: T | None) -> T:
    """``value``, which the test expects to exist (a row, an output, a claim's token)."""
    if value is None:
        raise AssertionError("expected a value, got None")
    return value


def checked(kind: type[T], value: object) -> T:
    """``value`` as the ``kind`` the test expects (dulwich's ``repo[sha]`` is any object kind)."""
    if not isinstance(value, kind):
        raise AssertionError(f"expected a {kind.__name__}, got {type(value).__name__}")
    return value
