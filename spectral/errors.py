"""One root exception and a few subclasses; the CLI maps them to exit codes."""

from __future__ import annotations

__all__ = [
    "first_line",
    "SpectralError",
    "SpecError",
    "UnknownOptimizerError",
    "DerivationError",
    "IncomparableError",
    "VerificationError",
]


class SpectralError(Exception):
    """Root of every error spectral raises on purpose."""


class SpecError(SpectralError, ValueError):
    """Bad user input: an optimizer declaration, expression or TOML file (exit code 2)."""


class UnknownOptimizerError(SpecError, KeyError):
    """An optimizer name that is not in the catalog; the message lists the known ones."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class DerivationError(SpectralError):
    """The conditions could not be turned into rules (exit code 1)."""


class IncomparableError(DerivationError):
    """A quantity is a max/min of incomparable monomials, e.g. ``Θ(n + L)``."""


class VerificationError(DerivationError):
    """A derived rule failed a condition term on substitution; it is never output."""


def first_line(exc: BaseException) -> str:
    """``Type: first line of the message`` — how an exception from user code (a factory, a
    model, an imported module) is quoted inside a one-line error."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
