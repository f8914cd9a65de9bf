"""Argument types of the measuring and training commands: every number range-checked.

Each function here is an argparse ``type=``: a bad value is a usage error (exit code 2)
before any work, with one line naming the option (argparse adds ``argument --steps:``).
The bounds keep a typo from starting a run that cannot finish or cannot fit in memory: a
width of 10^9 would allocate 10^18 floats, a million seeds would train for years.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from typing import Any

from ..text import MAX_INT_DIGITS, load_json

__all__ = [
    "MAX_SIZE",
    "device",
    "eps_option",
    "file_prefix",
    "floats",
    "integer",
    "integers",
    "json_object",
    "spec_name",
    "timeout",
]

MAX_SIZE = 2**53
"""Largest size a command accepts: beyond it a float no longer holds every integer, so
``width / base_width`` would be rounded (or overflow)."""

Error = argparse.ArgumentTypeError


def _parse_int(text: str) -> int:
    text = text.strip()
    if not re.fullmatch(rf"[+-]?[0-9]{{1,{MAX_INT_DIGITS}}}", text.replace("_", "")) or text.startswith("_"):
        raise Error(f"expected an integer, got {text[:40]!r}")
    return int(text)


def integer(lo: int, hi: int) -> Callable[[str], int]:
    """An integer from ``lo`` to ``hi``."""

    def parse(text: str) -> int:
        value = _parse_int(text)
        if not lo <= value <= hi:
            raise Error(f"expected an integer from {lo} to {hi}, got {text.strip()[:40]}")
        return value

    parse.__name__ = "integer"  # argparse names the type in some messages
    return parse


def integers(
    lo: int, hi: int, *, at_least: int = 1, at_most: int = 64, distinct: bool = False
) -> Callable[[str], tuple[int, ...]]:
    """Comma-separated integers, each from ``lo`` to ``hi``, ``at_least`` to ``at_most`` of them
    (``distinct``: ``at_least`` of them different, e.g. the widths a slope is fitted over)."""

    def parse(text: str) -> tuple[int, ...]:
        if len(text) > 2000:
            raise Error(f"expected at most {at_most} comma-separated integers, got {len(text)} characters")
        parts = [v for v in text.replace(" ", "").split(",") if v]
        if not at_least <= len(parts) <= at_most:
            few = "at least" if len(parts) < at_least else "at most"
            raise Error(
                f"expected {few} {at_least if len(parts) < at_least else at_most} comma-separated "
                f"integers, got {len(parts)}"
            )
        try:
            values = tuple(_parse_int(v) for v in parts)
        except Error:
            raise Error(f"expected comma-separated integers, got {text[:60]!r}") from None
        bad = [v for v in values if not lo <= v <= hi]
        if bad:
            raise Error(f"expected integers from {lo} to {hi}, got {bad[0]}")
        if distinct and len(set(values)) < at_least:
            raise Error(
                f"expected at least {at_least} different integers, got {len(set(values))} "
                f"({','.join(map(str, values))})"
            )
        return values

    parse.__name__ = "integers"
    return parse


def floats(lo: float, hi: float, *, lo_open: bool = False, hi_open: bool = False) -> Callable[[str], float]:
    """A finite number in ``[lo, hi]`` (``lo_open``: ``> lo``; ``hi_open``: ``< hi``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise Error(f"expected a number, got {text[:40]!r}") from None
        left, right = "(" if lo_open else "[", ")" if hi_open else "]"
        if (
            not math.isfinite(value)
            or value < lo
            or value > hi
            or (lo_open and value == lo)
            or (hi_open and value == hi)
        ):
            raise Error(f"expected a finite number in {left}{lo:g}, {hi:g}{right}, got {text.strip()[:40]}")
        return value

    parse.__name__ = "number"
    return parse


def timeout(text: str) -> float:
    """Seconds one measurement may take: (0, 1 week]."""
    return floats(0.0, 7 * 24 * 3600.0, lo_open=True)(text)


_DEVICE = re.compile(r"(auto|cpu|meta|mps|xpu|cuda)(:[0-9]{1,3})?")


def device(text: str) -> str:
    """``auto``, ``cpu``, ``cuda``, ``cuda:N``, ``mps``, ``xpu``: the spelling is checked
    here, the device's presence by :func:`check_device` before any work."""
    value = text.strip()
    m = _DEVICE.fullmatch(value)
    if m is None or (m.group(2) and m.group(1) in ("auto", "cpu", "meta")):
        raise Error(f"expected auto, cpu, cuda, cuda:N, mps or xpu, got {text[:40]!r}")
    return value


def check_device(name: str, option: str = "--device") -> None:
    """Refuse a device this machine does not have (torch imported here: only when needed)."""
    kind, _, index = name.partition(":")
    if kind in ("auto", "cpu", "meta"):
        return
    import torch

    module = getattr(torch, kind, None)
    available = module is not None and getattr(module, "is_available", lambda: False)()
    if not available:
        from ..errors import SpecError

        raise SpecError(f"{option} {name}: no {kind} device on this machine (use --device cpu)")
    if index:
        count = module.device_count()
        if int(index) >= count:
            from ..errors import SpecError

            raise SpecError(f"{option} {name}: this machine has {count} {kind} device(s), numbered from 0")


def json_object(max_chars: int = 16384, max_depth: int = 8) -> Callable[[str], dict[str, Any]]:
    """A JSON object of at most ``max_chars`` characters, nested at most ``max_depth`` deep,
    parsed by :func:`spectral.text.load_json` (no huge integers, no NaN or infinity)."""

    def parse(text: str) -> dict[str, Any]:
        if len(text) > max_chars:
            raise Error(f"at most {max_chars} characters of JSON, got {len(text)}")
        try:
            value = load_json(text, max_depth=max_depth)
        except ValueError as exc:
            raise Error(f"{exc}: {text[:60]!r}") from None
        if not isinstance(value, dict):
            raise Error(f'expected a JSON object {{"name": value, ...}}, got {text[:60]!r}')
        return value

    parse.__name__ = "JSON object"
    return parse


def eps_option(text: str) -> str:
    """``auto``, ``none``, ``KEY`` or ``KEY[INDEX]`` (``eps``, ``betas[1]``)."""
    value = text.strip()
    if value.lower() in ("auto", "none"):
        return value.lower()
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}(\[[0-9]{1,3}\])?", value):
        raise Error(f"expected auto, none, KEY or KEY[INDEX] (e.g. eps, betas[1]), got {text[:40]!r}")
    return value


def spec_name(text: str) -> str:
    """A declaration's name, by the spec loader's rules (1-64 of a-z, 0-9, ``-_+.``)."""
    from ..spec import _NAME_CHARS  # the one definition of a valid name

    if not text or len(text) > 64 or not set(text) <= _NAME_CHARS:
        raise Error(f"{text[:40]!r} must be 1-64 characters of a-z, 0-9, '-', '_', '+', '.'")
    return text


def file_prefix(text: str) -> str:
    """A file-name prefix: no folder part (``../x`` would write outside the folder)."""
    if not text or text in (".", "..") or "\0" in text or "/" in text or "\\" in text:
        raise Error(f"expected a file name prefix without '/' (the folder is --plots), got {text[:40]!r}")
    if len(text.encode("utf-8", "surrogateescape")) > 200:
        raise Error("a prefix of at most 200 bytes")
    return text
