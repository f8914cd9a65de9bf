"""Running a user's code under spectral's contract: a time limit, no exit, no stray output.

``spectral infer``, ``probe`` and ``coord-check`` call code they did not write: an optimizer
class, a factory, a model. :func:`user_code` wraps each such call (one measurement):

* **a time limit.** ``SIGALRM`` (``setitimer``) interrupts the call after ``timeout``
  seconds and it ends in :class:`TimeLimitExceeded`, one line naming what ran and for how
  long. Why a signal and not a worker process: the measurement hands the user's code
  objects (a class imported from a file path or from ``__main__``, its arguments, tensors,
  a model factory's closure) that a second interpreter would have to import and unpickle
  again — many user classes cannot be — and each worker would pay torch's import (seconds)
  again. A signal interrupts Python code and blocking calls (``time.sleep``, ``select``);
  it cannot stop one C call that never returns to the interpreter (a kernel in an endless
  loop): that is the limit of this guard. The alarm repeats every second until the call
  has ended, so code that swallows the first interruption (``except BaseException:``) is
  interrupted again. Only the main thread can receive signals; elsewhere (and where
  ``setitimer`` does not exist) the call runs without a limit.
* **no exit.** ``sys.exit(n)`` in the user's code would become spectral's exit status with
  no message: it becomes a :class:`~spectral.errors.SpecError` naming what ran.

Output the user's code prints is the CLI's concern (it sends ``sys.stdout`` to stderr while
measuring, so nothing lands inside the TOML it writes to stdout).
"""

from __future__ import annotations

import math
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import SpecError, TimeLimitExceeded, _Expired

__all__ = ["DEFAULT_TIMEOUT", "TimeLimitExceeded", "user_code"]

DEFAULT_TIMEOUT = 300.0
"""Seconds one measurement (one build and its steps, one training run) may take."""


def _can_alarm() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def _seconds(timeout: float) -> str:
    return f"{timeout:g} s"


@contextmanager
def user_code(what: str, timeout: float | None = DEFAULT_TIMEOUT) -> Iterator[None]:
    """Run the block as the user's code ``what`` (e.g. ``"torch.optim.AdamW.step()"``).

    ``timeout``: seconds, or ``None`` for no limit. An inner limit inside an outer one runs
    for the shorter of the two; the outer one's remaining time is restored afterwards.
    """
    if timeout is not None and not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
        raise SpecError(f"timeout: expected a positive number of seconds, got {timeout!r}")
    armed = timeout is not None and _can_alarm()
    previous_handler = None
    outer = (0.0, 0.0)
    if armed:
        outer = signal.getitimer(signal.ITIMER_REAL)
        if outer[0] and outer[0] < timeout:  # an outer limit ends first: it stays in charge
            armed = False
    if armed:

        def expire(signum, frame):  # noqa: ARG001 - the signal handler's signature
            raise _Expired

        previous_handler = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, float(timeout), 1.0)
    started = _now()
    try:
        yield
    except _Expired:
        if not armed:  # an outer limit's alarm: let it reach its own block
            raise
        _disarm(previous_handler, outer, started)
        armed = False
        raise TimeLimitExceeded(
            f"{what} did not return within {_seconds(timeout)} (the time limit of one "
            "measurement; raise it with --timeout SECONDS)"
        ) from None
    except SystemExit as exc:
        raise SpecError(f"{what} called sys.exit({exc.code!r}); a measurement must return") from None
    finally:
        if armed:
            _disarm(previous_handler, outer, started)


def _now() -> float:
    import time

    return time.monotonic()


def _disarm(handler, outer: tuple[float, float], started: float) -> None:
    """Stop this block's alarm and give the outer one (if any) its remaining time."""
    signal.setitimer(signal.ITIMER_REAL, 0.0)
    signal.signal(signal.SIGALRM, handler if handler is not None else signal.SIG_DFL)
    if outer[0]:
        left = max(outer[0] - (_now() - started), 1e-3)
        signal.setitimer(signal.ITIMER_REAL, left, outer[1])
