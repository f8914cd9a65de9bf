"""Optimizer declarations in TOML files: ``spectral derive --spec my.toml``.

A file declares one optimizer at the top level::

    name = "my-adam"                       # required: a-z, 0-9, '-', '_', '+', '.'
    update_norm = "n_in"                   # required: ‖A‖_R in n_in, n_out, L, G
    eps = "G / sqrt(n_in * n_out)"         # optional: the scale of the optimizer's ε
    applies_to = "all"                     # "all" (default) or "matrices"
    eps_label = "Adam ε"                   # optional: how tables name the ε row
    eps_key = "eps"                        # optional: the param-group key holding ε
    eps_index = 0                          # optional: ε's place in a tuple, eps=(eps1, eps2)
    summary = "sign descent"               # optional: one line

    [lr_horizon]                           # optional: lr ∝ (D/D₀)^exponent (tokens D)
    exponent = "-8/25"                     # a fraction or decimal, as a string
    source = "Bjorck et al. 2025, arXiv 2409.19913"   # required: where the law comes from
    assumed = false                        # optional: true if carried over, not measured

``lr_batch``, ``eps_batch`` and ``momentum_batch`` (``1 - β``) are tables of the same shape,
along the batch B (:mod:`spectral.engine.axes`; an absent law takes its default or is held).

Expressions are parsed only by :func:`spectral.engine.expr.parse_expression` (an ``ast``
whitelist; never ``eval``). Every problem is a :class:`~spectral.errors.SpecError` whose
message starts with the file and the field: ``my.toml: update_norm: unknown name 'x'; ...``.
"""

from __future__ import annotations

import os
import re
from fractions import Fraction
from typing import Any, Literal

import sympy as sp
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError
from pydantic_core import ErrorDetails

from ..errors import SpecError
from .expr import parse_expression, theta_of
from ..io import read_user_file
from ..spec import Law, OptimizerSpec
from ..symbols import SYMBOLS
from ..text import check_label, load_toml, strip_bom
from .theta import Theta

__all__ = ["load_spec", "parse_spec", "MAX_BYTES", "SpecFile"]

MAX_BYTES = 64 * 1024
"""Largest spec file read (64 KiB)."""
MAX_LABEL = 80
"""Characters ``eps_label`` may have."""
MAX_SUMMARY = 200
"""Characters ``summary`` may have."""


class ImplementationTable(BaseModel):
    """``[implementation]``: the torch class the declaration was measured on (what
    ``spectral infer`` writes), so ``spectral codegen`` can build it."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    # "class" is a keyword: the TOML key is `class`, the attribute cls
    cls: StrictStr = Field(alias="class")
    kwargs: dict[str, Any] = {}
    group: dict[str, Any] = {}
    default_eps: float | None = None


class LawTable(BaseModel):
    """``[lr_horizon]``, ``[lr_batch]``, ``[eps_batch]``, ``[momentum_batch]``: one law."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    exponent: StrictStr | StrictInt
    source: StrictStr
    assumed: bool = False


_EXPONENT = re.compile(r"-?[0-9]{1,4}(/[1-9][0-9]{0,3}|\.[0-9]{1,6})?")
"""A law's exponent as written: ``-8/25``, ``0.5``, ``1`` (bounded, so parsing is cheap)."""


class SpecFile(BaseModel):
    """The fields a spec file may have (anything else is refused)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: StrictStr
    update_norm: StrictStr
    eps: StrictStr | None = None
    applies_to: Literal["all", "matrices"] = "all"
    eps_label: StrictStr | None = None
    eps_key: StrictStr = "eps"
    eps_index: StrictInt | None = None
    summary: StrictStr | None = None
    implementation: ImplementationTable | None = None
    lr_horizon: LawTable | None = None
    lr_batch: LawTable | None = None
    eps_batch: LawTable | None = None
    momentum_batch: LawTable | None = None


_FIELDS = tuple(SpecFile.model_fields)


def _describe_error(err: ErrorDetails) -> tuple[str, str]:
    """(field, message) for one pydantic error, in words a spec author understands."""
    loc = ".".join(str(p) for p in err.get("loc", ())) or "(file)"
    kind = err.get("type", "")
    value = err.get("input")
    if kind == "missing":
        return loc, "required field is missing"
    if kind == "extra_forbidden":
        return loc, f"unknown field; the fields are {', '.join(_FIELDS)}"
    if kind == "literal_error":
        return loc, f"{value!r} must be 'all' or 'matrices'"
    if kind in ("string_type", "str_type"):
        return loc, f"expected a string, got {_toml_type(value)}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return loc, f"expected an integer, got {_toml_type(value)}"
    return loc, str(err.get("msg", "invalid value"))


def _toml_type(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__


def _check_text(where: str, field: str, text: str | None, limit: int) -> None:
    if text is None:
        return
    if len(text) > limit:
        raise SpecError(f"{where}: {field}: {len(text)} characters (at most {limit})")
    problem = check_label(text, field)  # controls, bidi overrides, zero-width characters
    if problem:
        raise SpecError(f"{where}: {problem}")


def _probe(where: str, field: str, expr: Any) -> None:
    """Refuse an expression whose Θ-scale is undefined (a difference, a negative constant).

    The exponents used here are arbitrary; only the shape of the expression matters.
    """
    n, length = Theta.monomial(1, 0), Theta.monomial(0, 1)
    env = ((SYMBOLS["n_in"], n), (SYMBOLS["n_out"], n), (SYMBOLS["L"], length), (SYMBOLS["G"], n))
    try:
        theta_of(expr, env)
    except SpecError as exc:
        raise SpecError(f"{where}: {field}: {exc}") from None


def parse_spec(data: dict[str, Any], *, where: str = "<spec>") -> OptimizerSpec:
    """Validate a decoded TOML table and build the :class:`OptimizerSpec`."""
    try:
        fields = SpecFile.model_validate(data)
    except ValidationError as exc:
        problems = [_describe_error(e) for e in exc.errors(include_url=False)]
        problems.sort()
        field, message = problems[0]
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise SpecError(f"{where}: {field}: {message}{more}") from None
    _check_text(where, "name", fields.name, 64)
    _check_text(where, "eps_label", fields.eps_label, MAX_LABEL)
    _check_text(where, "summary", fields.summary, MAX_SUMMARY)
    if fields.eps_label is not None and not fields.eps_label.strip():
        raise SpecError(f"{where}: eps_label: must not be empty")
    exprs: dict[str, Any] = {}
    for field in ("update_norm", "eps"):
        text = getattr(fields, field)
        if text is None:
            continue
        try:
            exprs[field] = parse_expression(text, field=field)
        except SpecError as exc:
            raise SpecError(f"{where}: {exc}") from None
    try:
        spec = OptimizerSpec(
            name=fields.name,
            update_norm=exprs["update_norm"],
            eps=exprs.get("eps"),
            applies_to=fields.applies_to,
            eps_label=fields.eps_label or "ε",
            eps_key=fields.eps_key,
            eps_index=fields.eps_index,
            summary=fields.summary or "",
            paper="",
            implementation=_implementation(fields.implementation),
            lr_horizon=_law(where, "lr_horizon", fields.lr_horizon),
            lr_batch=_law(where, "lr_batch", fields.lr_batch),
            eps_batch=_law(where, "eps_batch", fields.eps_batch),
            momentum_batch=_law(where, "momentum_batch", fields.momentum_batch),
        )
    except SpecError as exc:
        raise SpecError(f"{where}: {exc}") from None
    for field, expr in exprs.items():
        _probe(where, field, expr)
    return spec


def _law(where: str, field: str, table: LawTable | None) -> Law | None:
    """The :class:`Law` of one law table; its exponent read as an exact fraction."""
    if table is None:
        return None
    text = str(table.exponent)
    if not _EXPONENT.fullmatch(text):
        raise SpecError(
            f"{where}: {field}.exponent: {text[:40]!r} must be a fraction or decimal such "
            "as '-8/25', '0.5' or '1'"
        )
    _check_text(where, f"{field}.source", table.source, MAX_SUMMARY)
    e = Fraction(text)
    try:
        return Law(sp.Rational(e.numerator, e.denominator), table.source, table.assumed)
    except SpecError as exc:
        raise SpecError(f"{where}: {field}: {exc}") from None


def _implementation(table: ImplementationTable | None) -> Any:
    """The spec's ``implementation`` tuple (lists become tuples; pairs sorted by name)."""
    if table is None:
        return None

    def frozen(value: Any) -> Any:
        return tuple(frozen(v) for v in value) if isinstance(value, list) else value

    def pairs(mapping: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
        return tuple(sorted((k, frozen(v)) for k, v in mapping.items()))

    return (table.cls, pairs(table.kwargs), pairs(table.group), table.default_eps)


def load_spec(path: str | os.PathLike[str]) -> OptimizerSpec:
    """Read, validate and parse an optimizer declaration from a TOML file.

    Raises :class:`~spectral.errors.SpecError` naming the file (and the field) for a
    missing or unreadable file, a FIFO or device (not a regular file), a file over 64 KiB,
    text that is not UTF-8, invalid TOML (with its line), unknown or missing fields, wrong
    types and bad expressions.
    """
    where = str(path)
    raw = read_user_file(path, MAX_BYTES)  # a regular file only: a FIFO would block open()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{where}: not UTF-8 text (byte {exc.start})") from None
    text = strip_bom(text)
    try:
        data = load_toml(text)
    except ValueError as exc:  # bad syntax, too deep, a 5,000-digit integer
        raise SpecError(f"{where}: {exc}") from None
    return parse_spec(data, where=where)
