"""User text at the borders: what may come in, and how it goes out to each medium.

Coming in, text is checked once, where it enters (:func:`check_label` for names, labels
and summaries; :func:`check_expression_text` for expressions). Going out, every piece of
user text passes through exactly one function per medium:

* :func:`for_terminal` — error messages and anything printed plainly: control characters,
  bidirectional overrides and other invisible characters become visible escapes, so a
  message is always one line and cannot recolour, clear or rewrite the terminal;
* :func:`for_rich` — text inside rich tables: :func:`for_terminal` plus rich's markup
  escaping (``[red]`` stays literal);
* :func:`for_markdown` — markdown's special characters backslash-escaped, and those that
  start a rule, list or heading escaped at the start; whitespace collapsed: no rule,
  list, table cell break, strike-through or math can start inside user text;
* :func:`for_latex` — every TeX special escaped, Greek letters as math, the rest ``?``;
* :func:`for_python` — a Python string literal (ASCII, ``repr``-style escapes) for
  generated code, and :func:`for_docstring` for text inside a generated docstring.

JSON a user typed or a file holds is parsed by :func:`load_json` alone, TOML by
:func:`load_toml`: every way they can fail (bad syntax, nesting past the recursion limit, an
integer too long for Python to convert, a number JSON cannot hold such as ``1e999``) is one
:class:`ValueError` line.

Judgement calls, documented here once:

* Look-alike letters (fullwidth ``ｎ_in``, mathematical bold ``𝐧_in``, script ``ℒ``) are
  *refused* in expressions, with the character's code point: Python's parser would
  silently normalise them to ``n_in`` (NFKC), and a declaration must mean what it shows.
  Expressions are ASCII.
* Labels and summaries may hold any printable Unicode (``Adam ε``), but no control,
  format (bidi overrides, zero-width joiners), separator, private-use or unassigned
  characters.
* A UTF-8 byte-order mark at the start of a spec file is accepted and dropped.
"""

from __future__ import annotations

import json
import math
import sys
import unicodedata
from typing import Any

from .errors import _JSONNumberError

__all__ = [
    "MAX_INT_DIGITS",
    "check_expression_text",
    "check_label",
    "for_docstring",
    "for_latex",
    "for_markdown",
    "for_python",
    "for_rich",
    "for_terminal",
    "load_json",
    "load_toml",
    "strip_bom",
]

_INVISIBLE = {"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"}
"""Unicode categories never shown as they are: controls, format characters (bidi
overrides, zero-width), line/paragraph separators, private use, surrogates, unassigned."""


def _invisible(ch: str) -> bool:
    return unicodedata.category(ch) in _INVISIBLE


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def for_terminal(text: str) -> str:
    """One printable line: every invisible character (newline included) as an escape."""
    return "".join(_escape(ch) if _invisible(ch) else ch for ch in str(text))


def for_rich(text: str) -> str:
    """Text for a rich table or console: printable, and rich markup kept literal."""
    from rich.markup import escape

    return escape(for_terminal(text))


_MD_ANYWHERE = set("\\`*_|<>[]#~$&")
"""Markdown characters escaped wherever they stand: emphasis, code, tables, HTML, links,
headings, strike-through, math, entities."""
_MD_AT_START = set("-+=.!:>")
"""Escaped at the start of the text, where they would begin a rule, list, setext heading
or quote."""


def for_markdown(text: str) -> str:
    """One line of markdown text (a table cell or a paragraph) that renders as written."""
    line = " ".join(for_terminal(text).split())
    out = []
    for i, ch in enumerate(line):
        if ch in _MD_ANYWHERE or (i == 0 and ch in _MD_AT_START):
            out.append("\\" + ch)
        elif ch in ".)" and line[:i].isdigit() and line[i + 1 : i + 2] in ("", " "):
            # "1. " or "1) " would start an ordered list
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"$<$",
    ">": r"$>$",
    "|": r"$|$",
    "\n": " ",
    "\r": " ",
    "\t": " ",
    "·": r"$\cdot$",
    "–": "--",
    "—": "---",
    "²": r"$^2$",
    "√": r"$\surd$",
}
_GREEK = {
    "α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta", "ε": "varepsilon", "ζ": "zeta",
    "η": "eta", "θ": "theta", "ι": "iota", "κ": "kappa", "λ": "lambda", "μ": "mu", "ν": "nu",
    "ξ": "xi", "π": "pi", "ρ": "rho", "σ": "sigma", "τ": "tau", "υ": "upsilon", "φ": "phi",
    "χ": "chi", "ψ": "psi", "ω": "omega", "Γ": "Gamma", "Δ": "Delta", "Θ": "Theta",
    "Λ": "Lambda", "Ξ": "Xi", "Π": "Pi", "Σ": "Sigma", "Φ": "Phi", "Ψ": "Psi", "Ω": "Omega",
}  # fmt: skip


def for_latex(text: str) -> str:
    """User text → LaTeX text that pdflatex compiles (Greek letters become math).

    Characters LaTeX cannot typeset without extra packages become ``?``.
    """
    out = []
    for ch in text:
        if ch in _LATEX_SPECIAL:
            out.append(_LATEX_SPECIAL[ch])
        elif ch in _GREEK:
            out.append(f"$\\{_GREEK[ch]}$")
        elif " " <= ch <= "~" or "À" <= ch <= "ÿ" and ch not in "×÷":
            out.append(ch)
        else:
            out.append("?")
    return "".join(out)


def for_python(text: str) -> str:
    """A Python string literal for ``text``: ASCII only, so generated code stays ASCII."""
    return ascii(str(text))


def for_docstring(text: str) -> str:
    """``text`` inside a generated triple-quoted docstring: ASCII, backslashes and quotes
    escaped, no line breaks — it can neither close the docstring nor break the module."""
    inner = for_python(text)[1:-1]  # ascii() escapes backslashes, controls, non-ASCII
    return inner.replace('"', '\\"')


def check_label(text: str, what: str) -> str | None:
    """The problem with a label, name or summary (None when it is fine)."""
    for ch in text:
        if _invisible(ch):
            return (
                f"{what}: invisible or control character {_escape(ch)} "
                f"({unicodedata.name(ch, 'unnamed')}) is not allowed"
            )
    return None


def check_expression_text(text: str, what: str) -> str | None:
    """The problem with an expression's characters (None when it is fine)."""
    for i, ch in enumerate(text):
        if not ch.isascii():
            name = unicodedata.name(ch, "unnamed")
            hint = ""
            folded = unicodedata.normalize("NFKC", ch)
            if folded.isascii() and folded.strip():
                hint = f", which looks like {folded!r}"
            return (
                f"{what}: character {_escape(ch)} ({name}) at position {i}{hint}; "
                "expressions are ASCII: n_in, n_out, L, G, numbers, + - * / ** ( ), sqrt, "
                "max, min"
            )
        if _invisible(ch) and ch not in " \t\n\r":
            return f"{what}: control character {_escape(ch)} at position {i}"
    return None


def strip_bom(text: str) -> str:
    """Drop a leading byte-order mark (editors on Windows write one)."""
    return text[1:] if text.startswith("\ufeff") else text


MAX_INT_DIGITS = 30
"""Most digits an integer typed by a user may have (a command-line option, a JSON value):
far beyond any count, size or seed, and far below the 4,300 digits past which Python
refuses to convert a string to an integer at all."""


def _json_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _JSONNumberError(f"an integer of {digits} digits in JSON (at most {MAX_INT_DIGITS})")
    return int(text)


def _json_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _JSONNumberError(f"the number {text[:40]} in JSON is beyond the range of a float")
    return value


def _json_constant(name: str) -> float:
    raise _JSONNumberError(f"{name} in JSON: JSON has no NaN or Infinity")


def load_json(text: str, *, max_depth: int | None = None, non_finite: bool = False) -> Any:
    """The value of JSON ``text``; every failure is one :class:`ValueError` line.

    Refused: invalid JSON (with the position), nesting deeper than ``max_depth`` (checked
    before parsing: deep text makes ``json.loads`` recurse past Python's limit), integers of
    more than :data:`MAX_INT_DIGITS` digits, and, unless ``non_finite`` (for a caller that
    names the field holding one), ``NaN``, ``Infinity`` or a float that overflows (``1e999``).
    """
    if max_depth is not None and _nesting(text) > max_depth:
        raise ValueError(f"JSON nested more than {max_depth} deep")
    numbers: dict[str, Any] = {}
    if not non_finite:
        numbers = {"parse_float": _json_float, "parse_constant": _json_constant}
    try:
        return json.loads(text, parse_int=_json_int, **numbers)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at character {exc.pos})") from None
    except _JSONNumberError as exc:
        raise ValueError(str(exc)) from None
    except RecursionError:
        raise ValueError("JSON nested too deep") from None


def load_toml(text: str) -> dict[str, Any]:
    """The table of TOML ``text``; every failure is one :class:`ValueError` line starting
    ``invalid TOML:`` (bad syntax with its line, nesting past the recursion limit, an integer
    longer than Python converts: ``tomllib`` has no hook to bound them as JSON's has)."""
    import tomllib  # here: only declarations and configs are TOML, ``derive NAME`` reads none

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"invalid TOML: {exc}") from None
    except RecursionError:
        raise ValueError("invalid TOML: nested too deeply") from None
    except ValueError:  # int() of a literal past sys.get_int_max_str_digits()
        limit = sys.get_int_max_str_digits()
        raise ValueError(f"invalid TOML: an integer of more than {limit} digits") from None


def _nesting(text: str) -> int:
    """Deepest bracket nesting of JSON text, strings skipped."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest
