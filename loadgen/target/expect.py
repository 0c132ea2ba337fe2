"""The expect map of a sweep configuration against the server's settings: dotted keys walk into nested
objects and lists; numbers compare by value."""

from __future__ import annotations


def expect_mismatches(info: dict, expect: dict) -> list[str]:
    """'key: server has X, expected Y' for each expected key whose value differs (dotted keys walk into
    nested objects and lists). Numbers compare by value, so "16" matches 16 and 16.0."""
    wrong = []
    for key, want in expect.items():
        have = lookup(info, key)
        if have is _MISSING:
            wrong.append(f"{key}: missing from the server info, expected {want}")
        elif not same_value(have, want):
            wrong.append(f"{key}: server has {have}, expected {want}")
    return wrong


_MISSING = object()


def lookup(obj, dotted: str):
    for part in dotted.split("."):
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        elif isinstance(obj, list) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        else:
            return _MISSING
    return obj


def same_value(have, want) -> bool:
    if isinstance(have, bool) or isinstance(want, bool):
        return str(have).lower() == str(want).lower()
    try:
        return float(have) == float(want)
    except (TypeError, ValueError):
        return str(have) == str(want)
