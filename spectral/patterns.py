"""Parameter names → roles: the name anchor and the first-match loop both runtimes share.

A model family (:mod:`spectral.families`, :mod:`spectral.jax.labels`) lists
``(pattern, role)`` pairs; a parameter's role is the role of the first pattern that its name
matches (:func:`role_of`). Names may carry a wrapper's prefix (``module.`` from DDP,
``_orig_mod.`` from torch.compile, ``model.`` from Hugging Face), so a family's patterns are
written from a dot or from the start of the name: :func:`anchored` puts that anchor in front
once. Standard library only (and the role names of :mod:`spectral.scaling`), so the
vendored config modules copy it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from spectral.errors import ConfigError, ConfigTypeError, UnsupportedModelError
from spectral.scaling import LAYER_OF, unknown_role

Patterns = Mapping[str, str] | Iterable[tuple[str, str]]

ANCHOR = r"(^|\.)"
"""Where a family's pattern starts: at the start of a name or right after a dot."""


def anchored(patterns: Any) -> Any:
    """``patterns`` with :data:`ANCHOR` in front of each pattern: a pattern, a tuple of
    patterns, or a tuple of (pattern, role) pairs. A pattern that starts with ``^`` already
    says where it starts and is kept, and so is the empty pattern (no module)."""
    if isinstance(patterns, str):
        return (
            patterns if not patterns or patterns.startswith("^") else ANCHOR + patterns
        )
    return tuple(
        anchored(p) if isinstance(p, str) else (anchored(p[0]), *p[1:])
        for p in patterns
    )


def role_pairs(patterns: Patterns | None) -> list[tuple[str, str]]:
    """A user's ``patterns=`` (a dict or pairs, regular expression -> role) as a list."""
    return list(patterns.items() if isinstance(patterns, Mapping) else patterns or ())


def checked_pattern(pattern: object, where: str) -> str:
    """``pattern`` if it is a regular expression that compiles; a one-line error naming
    ``where`` otherwise (never a bare re.error from deep inside a search)."""
    if not isinstance(pattern, str):
        raise ConfigTypeError(f"{where}: a pattern must be a string, got {pattern!r}")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ConfigError(
            f"{where}: pattern {pattern!r} does not compile: {exc}"
        ) from None
    return pattern


def role_of(name: str, pairs: Iterable[tuple[str, str]], leaf: Any = None) -> str:
    """The role of the first pair whose pattern ``name`` matches (or equals: an exact
    name works as a pattern). A name nothing matches is an error that names it, with the
    shape of ``leaf`` where it has one: there is no silent default."""
    for pattern, role in pairs:
        if pattern == name or re.search(pattern, name):
            problem = unknown_role(pattern, role)
            if problem is not None:
                raise ConfigError(problem)
            return role
    shape = f" (shape {tuple(leaf.shape)})" if hasattr(leaf, "shape") else ""
    raise UnsupportedModelError(
        f"parameter {name!r}{shape} matches no role pattern; pass "
        "patterns={'<regex>': '<role>'} with a role from " + ", ".join(LAYER_OF)
    )


def unplaced_error(unplaced: list[str]) -> UnsupportedModelError:
    """The one error for every parameter (``"name (shape)"``) that no pattern places."""
    return UnsupportedModelError(
        f"{len(unplaced)} parameter(s) match no role pattern: {'; '.join(unplaced)}. "
        "Pass patterns={'<regex>': '<role>'} (roles: "
        + ", ".join(LAYER_OF)
        + ") or an adapter= for this model family."
    )
