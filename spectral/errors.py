"""Every exception spectral raises: one root, :class:`SpectralError`, and a few kinds.

The CLI maps them to exit codes. A kind that replaced a builtin the runtime raised before
(``ValueError``, ``TypeError``, ``RuntimeError``, ``ImportError``) also derives from it, so
a user's ``except ValueError`` keeps catching what it caught. Standard library only, and
ASCII: the runtime (``spectral.torch``, ``spectral.jax``) imports this module, and
``spectral codegen --vendor`` copies it to the front of a standalone config.
"""

from __future__ import annotations

__all__ = [
    "first_line",
    "SpectralError",
    "SpecError",
    "UnknownOptimizerError",
    "DerivationError",
    "IncomparableError",
    "VerificationError",
    "ConfigError",
    "ConfigTypeError",
    "ConfigStateError",
    "UnsupportedModelError",
    "MissingDependencyError",
    "NotFiniteError",
    "MetaDeviceError",
    "Terminated",
    "InternalError",
    "VendorError",
    "UsageError",
    "OutputError",
    "FileExistsRefusal",
    "TimeLimitExceeded",
    "StepFailed",
    "BadStep",
]


class SpectralError(Exception):
    """Root of every error spectral raises on purpose."""


# --------------------------------------------------------------------------------------
# the engine and the command line: bad input, rules that cannot be derived
# --------------------------------------------------------------------------------------


class SpecError(SpectralError, ValueError):
    """Bad user input: an optimizer declaration, expression or TOML file (exit code 2)."""


class UnknownOptimizerError(SpecError, KeyError):
    """An optimizer name that is not in the catalog; the message lists the known ones."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class DerivationError(SpectralError):
    """The conditions could not be turned into rules (exit code 1)."""


class IncomparableError(DerivationError):
    """A quantity is a max/min of incomparable monomials, e.g. ``Theta(n + L)``."""


class VerificationError(DerivationError):
    """A derived rule failed a condition term on substitution; it is never output."""


class UsageError(SpectralError):
    """Inconsistent command-line options (exit code 2)."""


class OutputError(SpecError):
    """An output path that cannot be written: no such folder, a folder, a device (exit 2)."""


class FileExistsRefusal(OutputError):
    """The output file exists and ``--force`` was not given (exit code 2)."""


class TimeLimitExceeded(SpecError):
    """The user's code did not return within the time limit (exit code 2)."""


class StepFailed(SpectralError):
    """``step()`` of a measured optimizer raised (e.g. a matrix-only optimizer on a bias)."""


class BadStep(StepFailed):
    """A step whose size is not a measurement: NaN or inf weights, or an overflowing step."""


class _Expired(BaseException):
    """Raised inside the user's code by the time limit's alarm and turned into
    :class:`TimeLimitExceeded` at once; a BaseException, so that an ``except Exception``
    in the user's code does not swallow it."""


class Terminated(BaseException):
    """SIGTERM while a command holds temporary files: unwinds like Ctrl-C (a
    BaseException, past ``except Exception``), so they are removed on the way out."""


class _JSONNumberError(SpectralError, ValueError):
    """A number in JSON text that no value of Python can carry faithfully."""


# --------------------------------------------------------------------------------------
# the runtime: what a config's functions raise
# --------------------------------------------------------------------------------------


class ConfigError(SpectralError, ValueError):
    """A bad argument or a config mistake: a value the caller passed that the rules cannot
    use (an unknown adapter name, a pattern that does not compile, fewer than three widths),
    a config used the wrong way (hooks on an absorbed config), a call out of order (build
    the optimizer before ``apply_multipliers``), an optimizer state from another model.
    Every entry point raises it for its arguments; what it measures on the model it
    returns as problem lines."""


class ConfigTypeError(ConfigError, TypeError):
    """A :class:`ConfigError` for an argument of the wrong type (so also a ``TypeError``)."""


class ConfigStateError(ConfigError, RuntimeError):
    """A :class:`ConfigError` for a call that the object's state no longer allows (adding
    parameters to a built optimizer; so also a ``RuntimeError``)."""


class UnsupportedModelError(SpectralError, ValueError):
    """The model has a structure the rules do not cover: no family recognises it, a
    parameter no pattern places, a tie or config flag the rules refuse, a module whose
    multiplier cannot be folded or absorbed, parameters an optimizer cannot step."""


class NotFiniteError(UnsupportedModelError):
    """A model's output is NaN or inf where it was measured: no slope can be fitted from
    it (the message says where it first was)."""


class MetaDeviceError(UnsupportedModelError):
    """The meta device has no kernel for an op of a model's forward pass: nothing is known
    of whether the model runs (spectral check --hf-config then says so in a note)."""


class MissingDependencyError(SpectralError, ImportError):
    """A package the requested optimizer needs is not installed (the message says which)."""


class InternalError(SpectralError, RuntimeError):
    """A bug of spectral's, never the user's input: the CLI lets it show its traceback."""


class VendorError(InternalError):
    """A runtime module breaks the rules that let it be vendored (a bug of spectral's)."""


def first_line(exc: BaseException) -> str:
    """``Type: first line of the message``: how an exception from user code (a factory, a
    model, an imported module) is quoted inside a one-line error."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
