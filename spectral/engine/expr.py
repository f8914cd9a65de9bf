"""Untrusted expression text → sympy expression → Θ-scale.

User text is never handed to ``eval``, ``sympify`` or ``parse_expr`` (all of them call
``eval``). :func:`parse_expression` walks Python's ``ast`` over a whitelist and builds the
sympy expression from constructors; anything else is refused with a message. Costs are
bounded before any work is done: text length, node count, nesting depth and exponent size.

>>> parse_expression("sqrt(n_in/n_out) * G", field="update_norm")
G*sqrt(n_in)/sqrt(n_out)
>>> parse_expression("__import__('os').system('x')", field="update_norm")
Traceback (most recent call last):
...
spectral.errors.SpecError: update_norm: only sqrt, max and min may be called, not a call to __import__(...)
"""

from __future__ import annotations

import ast
from fractions import Fraction
from functools import lru_cache

import sympy as sp

from ..errors import SpecError
from ..symbols import SYMBOLS
from ..text import check_expression_text
from .theta import Theta

__all__ = ["parse_expression", "theta_of", "MAX_LENGTH", "MAX_NODES", "MAX_DEPTH", "MAX_EXPONENT"]

MAX_LENGTH = 400
"""Characters an expression may have."""
MAX_NODES = 200
"""Syntax-tree nodes an expression may have."""
MAX_DEPTH = 24
"""Nesting depth an expression may have."""
MAX_EXPONENT = 16
"""Largest ``|p|`` in ``x**p`` (and largest numerator/denominator of a rational ``p``)."""
MAX_NUMBER = 10**6
"""Largest magnitude of a literal number, and of its numerator and denominator."""
MAX_CONSTANT_BITS = 4096
"""Largest size (in bits) of a constant computed from a power of a number."""

_FUNCTIONS = {"sqrt": 1, "max": None, "min": None}  # name -> arity (None: two or more)
_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}


def _describe(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # pragma: no cover - unparse of a parsed node does not fail
        text = type(node).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def _depth(node: ast.AST) -> int:
    children = list(ast.iter_child_nodes(node))
    return 1 + max((_depth(c) for c in children), default=0)


def _number(value: object, field: str) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(f"{field}: only numbers are allowed as constants, not {value!r}")
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        raise SpecError(f"{field}: {value!r} is not a finite number")
    frac = Fraction(str(value)) if isinstance(value, float) else Fraction(value)
    if abs(frac) > MAX_NUMBER or frac.denominator > MAX_NUMBER:
        raise SpecError(f"{field}: the number {value!r} is too large (at most {MAX_NUMBER})")
    return frac


class _Builder:
    """Turns a whitelisted ``ast`` into a sympy expression."""

    def __init__(self, field: str):
        self.field = field

    def fail(self, message: str) -> SpecError:
        return SpecError(f"{self.field}: {message}")

    def constant(self, node: ast.AST) -> Fraction:
        """A sub-expression that must be a plain number (an exponent)."""
        expr = self.build(node)
        if not expr.is_Rational:
            raise self.fail(f"an exponent must be a number, not {_describe(node)}")
        return Fraction(int(expr.p), int(expr.q))

    def _bounded(self, left: sp.Expr, right: sp.Expr, node: ast.AST) -> None:
        """Each power of a number is bounded; bound their products and sums too, so no
        constant outgrows MAX_CONSTANT_BITS (nor Python's limit on printing integers)."""
        bits = 0
        for side in (left, right):
            for atom in side.atoms(sp.Rational):
                bits += max(int(atom.p).bit_length(), int(atom.q).bit_length())
        if bits > MAX_CONSTANT_BITS:
            raise self.fail(f"the constants in {_describe(node)} are too large")

    def build(self, node: ast.AST) -> sp.Expr:
        if isinstance(node, ast.Constant):
            return sp.Rational(_number(node.value, self.field))
        if isinstance(node, ast.Name):
            if node.id not in SYMBOLS:
                known = ", ".join(SYMBOLS)
                raise self.fail(f"unknown name {node.id!r}; the symbols are {known}")
            return SYMBOLS[node.id]
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                return -self.build(node.operand)
            if isinstance(node.op, ast.UAdd):
                return self.build(node.operand)
            raise self.fail(f"operator not allowed in {_describe(node)}")
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.BitXor):
                raise self.fail(f"'^' is not a power; write ** in {_describe(node)}")
            if type(node.op) not in _BINOPS:
                raise self.fail(f"operator not allowed in {_describe(node)}; use + - * / **")
            left = self.build(node.left)
            if isinstance(node.op, ast.Pow):
                p = self.constant(node.right)
                if abs(p) > MAX_EXPONENT or p.denominator > MAX_EXPONENT:
                    raise self.fail(f"exponent {p} is too large (|p| ≤ {MAX_EXPONENT})")
                if left.is_Rational:  # sympy evaluates powers of numbers eagerly: bound the digits
                    bits = max(int(left.p).bit_length(), int(left.q).bit_length())
                    if bits * abs(p) > MAX_CONSTANT_BITS:
                        raise self.fail(f"the constant {_describe(node)} is too large")
                return sp.Pow(left, sp.Rational(p.numerator, p.denominator))
            right = self.build(node.right)
            self._bounded(left, right, node)
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Sub):
                return left - right
            if isinstance(node.op, ast.Mult):
                return left * right
            if right == 0:
                raise self.fail(f"division by zero in {_describe(node)}")
            return left / right
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else None
            if name not in _FUNCTIONS:
                raise self.fail(
                    f"only sqrt, max and min may be called, not a call to {_describe(node.func)}(...)"
                )
            if node.keywords:
                raise self.fail(f"{name}() takes no keyword arguments")
            args = [self.build(a) for a in node.args]
            if name == "sqrt":
                if len(args) != 1:
                    raise self.fail("sqrt() takes exactly one argument")
                return sp.sqrt(args[0])
            if len(args) < 2:
                raise self.fail(f"{name}() needs at least two arguments")
            try:  # sympy refuses to compare a non-real argument (sqrt(-1), 0**-1)
                return sp.Max(*args) if name == "max" else sp.Min(*args)
            except (ValueError, TypeError):
                raise self.fail(f"{name}() of {_describe(node)}: its arguments must be real") from None
        raise self.fail(f"{_describe(node)!r} is not allowed; use numbers, {', '.join(SYMBOLS)}, "
                        "+ - * / **, parentheses, sqrt, max, min")


def parse_expression(text: object, *, field: str) -> sp.Expr:
    """Parse untrusted ``text`` into a sympy expression, or raise :class:`SpecError`.

    ``field`` names what is being parsed (``"update_norm"``, ``"eps"``) in every message.
    """
    if not isinstance(text, str):
        raise SpecError(f"{field}: expected a string expression, got {type(text).__name__}")
    if not text.strip():
        raise SpecError(f"{field}: the expression is empty")
    if len(text) > MAX_LENGTH:
        raise SpecError(f"{field}: the expression has {len(text)} characters (at most {MAX_LENGTH})")
    problem = check_expression_text(text, field)  # look-alike letters are refused, not folded
    if problem:
        raise SpecError(problem)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        detail = getattr(exc, "msg", None) or type(exc).__name__
        raise SpecError(f"{field}: not a valid expression ({detail}): {text!r}") from None
    nodes = sum(1 for _ in ast.walk(tree))
    if nodes > MAX_NODES:
        raise SpecError(f"{field}: the expression has {nodes} syntax nodes (at most {MAX_NODES})")
    if _depth(tree) > MAX_DEPTH:
        raise SpecError(f"{field}: the expression is nested too deeply (at most {MAX_DEPTH} levels)")
    return _Builder(field).build(tree.body)


# --------------------------------------------------------------------------------------
# Θ of a sympy expression
# --------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def theta_of(expr: sp.Expr, env: tuple[tuple[sp.Symbol, Theta], ...]) -> Theta:
    """The Θ-scale of a positive ``expr`` once each symbol is replaced by its scale.

    ``env`` is a tuple of ``(symbol, Theta)`` pairs (a tuple so that results can be cached).
    Constant factors drop out; sums become maxima. Raises :class:`SpecError` for anything
    whose scale is not determined (a difference, a non-positive constant, a symbolic
    exponent).
    """
    return _theta(expr, dict(env))


def _theta(expr: sp.Expr, env: dict[sp.Symbol, Theta]) -> Theta:
    if expr.is_Symbol:
        if expr not in env:
            raise SpecError(f"the symbol {expr} has no scale here")
        return env[expr]
    if expr.is_Number:
        if not expr.is_positive:
            raise SpecError(f"the constant {expr} is not positive, so the expression has no scale")
        return Theta.one()
    if isinstance(expr, sp.Mul):
        out = Theta.one()
        for arg in expr.args:
            out = out * _theta(arg, env)
        return out
    if isinstance(expr, sp.Pow):
        if not expr.exp.is_Rational:
            raise SpecError(f"the exponent of {expr} must be a number")
        return _theta(expr.base, env) ** Fraction(int(expr.exp.p), int(expr.exp.q))
    if isinstance(expr, sp.Add):
        for arg in expr.args:
            if arg.could_extract_minus_sign():
                raise SpecError(
                    f"{expr} is a difference; its scale is not determined (write a sum or max/min)"
                )
        return Theta.maximum(*(_theta(arg, env) for arg in expr.args))
    if isinstance(expr, sp.Max):
        return Theta.maximum(*(_theta(arg, env) for arg in expr.args))
    if isinstance(expr, sp.Min):
        return Theta.minimum(*(_theta(arg, env) for arg in expr.args))
    raise SpecError(f"cannot take the scale of {expr}")
