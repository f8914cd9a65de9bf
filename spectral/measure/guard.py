"""Running a user's code under spectral's contract: a time limit, no exit, no stray output.

``spectral infer``, ``probe``, ``coord-check`` and ``check`` call code they did not write: an
optimizer class, a factory, a model. :func:`user_code` wraps each such call (one measurement):

* **a time limit.** ``SIGALRM`` (``setitimer``) interrupts the call after ``timeout``
  seconds and it ends in :class:`TimeLimitExceeded`, one line naming what ran and for how
  long. Why a signal and not a worker process: the measurement hands the user's code
  objects (a class imported from a file path or from ``__main__``, its arguments, tensors,
  a model factory's closure) that a second interpreter would have to import and unpickle
  again — many user classes cannot be — and each worker would pay torch's import (seconds)
  again. A signal interrupts Python code and blocking calls (``time.sleep``, ``select``);
  it cannot stop one C call that never returns to the interpreter (a kernel in an endless
  loop): that is the limit of this guard. Only the main thread can receive signals;
  elsewhere (and where ``setitimer`` does not exist) the call runs without a limit.
* **an alarm that fires into the user's code only.** The timer is one-shot. When it fires
  in the user's code, the handler raises there and arms one more shot a second later, so
  code that swallows the interruption (``except BaseException:``) is interrupted again;
  when it fires in the guard's own frames (the expiry already unwinding into them) it
  raises nothing; while an installed package's module is being imported it waits for the
  import to end (up to IMPORT_GRACE), since an import cut short leaves a half-made module
  for the rest of the process. Leaving the block stops the alarm before anything else, and
  an alarm already on its way is dropped, so no second interruption can reach the clean-up,
  and no timer is left to kill the process with ``SIGALRM`` after the handler is restored.
* **no exit.** ``sys.exit(n)`` in the user's code would become spectral's exit status with
  no message: it becomes a :class:`~spectral.errors.SpecError` naming what ran.

Output the user's code prints is the CLI's concern (it sends ``sys.stdout`` to stderr while
measuring, so nothing lands inside the TOML it writes to stdout).
"""

from __future__ import annotations

import functools
import math
import os
import signal
import sysconfig
import threading
import time
from types import FrameType, TracebackType
from typing import Any, Literal, Self

from ..errors import SpecError, TimeLimitExceeded, _Expired

__all__ = ["DEFAULT_TIMEOUT", "TimeLimitExceeded", "user_code"]

DEFAULT_TIMEOUT = 300.0
"""Seconds one measurement (one build and its steps, one training run) may take."""

AGAIN = 1.0
"""Seconds after an interruption before the next one, while the user's code still runs."""
IMPORT_GRACE = 30.0
"""Seconds an interruption waits for an installed package's import to finish (an import
cut short leaves a half-made module behind, broken for the rest of the process: torch's
triton, imported lazily by the first step)."""
LONGEST_ALARM = 2.0**31
"""The longest alarm set (68 years): a limit past it (``1e300``) is as good as none, and
``setitimer`` raises OverflowError for a number ``time_t`` cannot hold."""
_RETRY = 0.05


def _can_alarm() -> bool:
    return (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )


class user_code:  # lower case: used as a function, ``with user_code(what, timeout):``
    """Run the block as the user's code ``what`` (e.g. ``"torch.optim.AdamW.step()"``).

    ``timeout``: seconds, or ``None`` for no limit. An inner limit inside an outer one runs
    for the shorter of the two; the outer one's remaining time is restored afterwards.
    """

    def __init__(self, what: str, timeout: float | None = DEFAULT_TIMEOUT):
        if timeout is not None and not (
            isinstance(timeout, (int, float))
            and not isinstance(timeout, bool)
            and math.isfinite(timeout)
            and timeout > 0
        ):
            raise SpecError(
                f"timeout: expected a positive number of seconds, got {timeout!r}"
            )
        self.what, self.timeout = what, timeout
        self._armed = False
        self._stopped = False
        self._previous: Any = None
        self._outer = (0.0, 0.0)
        self._started = 0.0
        self._waited = 0.0

    def __enter__(self) -> Self:
        if self.timeout is None or not _can_alarm():
            return self
        self._outer = signal.getitimer(signal.ITIMER_REAL)
        # an outer limit that ends first stays in charge
        if self._outer[0] and self._outer[0] < self.timeout:
            return self
        self._armed = True
        self._started = time.monotonic()
        self._previous = signal.signal(signal.SIGALRM, self._fire)
        # one shot: no interval
        signal.setitimer(signal.ITIMER_REAL, min(float(self.timeout), LONGEST_ALARM))
        return self

    def _fire(self, signum: int, frame: FrameType | None) -> None:
        """The alarm: an interruption in the user's code, nothing once the block is left."""
        if self._stopped:  # an alarm that was on its way when the block was left
            return
        if (
            frame is not None
            and self._waited < IMPORT_GRACE
            and _importing_a_package(frame)
        ):
            self._waited += _RETRY
            signal.setitimer(signal.ITIMER_REAL, _RETRY)  # once the import is done
            return
        # one more shot, should this one be swallowed
        signal.setitimer(signal.ITIMER_REAL, AGAIN)
        # the expiry is unwinding into the guard: nothing is raised there
        if frame is not None and frame.f_code in _OWN_CODE:
            return
        raise _Expired

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        if self._armed:
            self._stop()
        if kind is not None and issubclass(kind, _Expired) and self._armed:
            raise TimeLimitExceeded(
                f"{self.what} did not return within {self.timeout:g} s (the time limit of one "
                "measurement; raise it with --timeout SECONDS)"
            ) from None
        if kind is not None and issubclass(kind, SystemExit):
            code = exc.code if isinstance(exc, SystemExit) else None
            raise SpecError(
                f"{self.what} called sys.exit({code!r}); a measurement must return"
            ) from None
        return False  # anything else (an outer limit's expiry too) goes on unchanged

    def _stop(self) -> None:
        """Stop this block's alarm, drop one already on its way, restore the handler and the
        outer limit (with its remaining time)."""
        self._stopped = True
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        _let_pending_signals_run()  # a SIGALRM delivered before the line above meets _stopped
        signal.signal(
            signal.SIGALRM,
            self._previous if self._previous is not None else signal.SIG_DFL,
        )
        if self._outer[0]:
            left = max(self._outer[0] - (time.monotonic() - self._started), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, left)


@functools.cache
def _installed_folders() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple(
        os.path.join(paths[k], "")
        for k in ("purelib", "platlib", "stdlib")
        if k in paths
    )


def _importing_a_package(frame: FrameType) -> bool:
    """Whether an installed package's (or the standard library's) module is being imported
    on this stack: a module's top-level code run by importlib. The user's own module is not
    one: its import is the user's code."""
    folders = _installed_folders()
    f: FrameType | None = frame
    while f is not None:
        back = f.f_back
        if (
            f.f_code.co_name == "<module>"
            and back is not None
            and back.f_code.co_filename.startswith("<frozen importlib")
            and f.f_code.co_filename.startswith(folders)
        ):
            return True
        f = back
    return False


def _let_pending_signals_run() -> None:
    """A Python call: the interpreter runs the handlers of signals already delivered here."""


_OWN_CODE = frozenset(
    {
        user_code.__exit__.__code__,
        user_code._stop.__code__,
        user_code._fire.__code__,
        _let_pending_signals_run.__code__,
    }
)
"""The guard's own frames, into which the alarm never raises."""
