"""Base values as the user writes them: ``0.01``, or ``KEY=VALUE`` pairs, and their check.

``spectral transfer --lr muon=0.02,adamw=3e-4`` and ``spectral sweep --multiplier
output=0.5`` take the same syntax; :func:`parse_base_value` reads it (an ``argparse``
type: its errors are ``ArgumentTypeError``) and :func:`check_base_value` checks it
against a :class:`spectral.transfer.Plan`, before any work, so that the message names the
command-line option and the optimizers of that plan. :mod:`spectral.scaling` refuses the
same values too, later and without the option's name.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from .errors import SpecError
from .engine.roles import ALL_ROLE_NAMES, ROLE_NAMES

__all__ = ["LAYERS", "check_base_value", "parse_base_value", "parse_number"]

LAYERS = ("input", "hidden", "output")
"""Keys a ``multiplier`` may use besides roles and optimizers: the model's three layers."""


def parse_number(text: str) -> float:
    """A finite float, or an ``ArgumentTypeError`` naming the text."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def parse_base_value(text: str) -> float | dict[str, float]:
    """``0.01``, or ``KEY=VALUE`` pairs: ``muon=0.02,adamw=3e-4``, ``hidden_weight=0.1,default=0``.

    KEY is a role, an optimizer or ``default`` (checked against the plan by
    :func:`check_base_value`, which knows the optimizers); VALUE a finite number. Signs are
    checked there too, so that ``--lr -1`` is one ``error:`` line naming the option.

    >>> parse_base_value("muon=0.02, adamw=3e-4")
    {'muon': 0.02, 'adamw': 0.0003}
    """
    if "=" not in text:
        return parse_number(text)
    out: dict[str, float] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"expected KEY=VALUE pairs, got {text!r}")
        if key in out:
            raise argparse.ArgumentTypeError(f"{key} is given twice in {text!r}")
        out[key] = parse_number(value.strip())
    return out


def check_base_value(value: float | dict[str, float] | None, plan: Any, what: str) -> None:
    """Refuse a negative value or a key that names nothing, naming the option ``--what``.

    ``plan`` is a :class:`spectral.transfer.Plan` (its ``optimizers`` maps role → optimizer
    name); ``what`` the ``hparams`` keyword (``lr``, ``multiplier``, ``lr_scale``, …).
    """
    option = "--" + what.replace("_", "-")
    if value is None:
        return
    pairs = value.items() if isinstance(value, dict) else [(None, value)]
    for key, number in pairs:
        if number < 0:
            given = f"{number:g}" if key is None else f"{key}={number:g}"
            raise SpecError(f"{option}: expected a number >= 0, got {given}")
    if not isinstance(value, dict):
        return
    optimizers = list(dict.fromkeys(plan.optimizers.values()))
    roles = ALL_ROLE_NAMES if getattr(plan, "all_roles", False) else ROLE_NAMES
    known = [*roles, *optimizers, "default"]
    if what == "multiplier":
        known += list(LAYERS)
    unknown = [k for k in value if k not in known]
    if unknown:
        layers = f", layers ({', '.join(LAYERS)})" if what == "multiplier" else ""
        raise SpecError(
            f"{option}: unknown key(s) {', '.join(unknown)}; use roles "
            f"({', '.join(roles)}), optimizers used here ({', '.join(optimizers)})"
            f"{layers} or default"
        )
