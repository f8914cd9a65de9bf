"""The implementation under test: an optimizer class, its arguments, and how it is built.

:func:`load_target` imports ``MODULE.CLASS`` and checks the keyword arguments against its
constructor; every failure is a one-line :class:`~spectral.errors.SpecError`.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from ..errors import SpecError, first_line

__all__ = ["Target", "constructor_defaults", "load_target"]


@dataclass(frozen=True)
class Target:
    """An optimizer class and the keyword arguments it is built with."""

    label: str
    cls: type
    kwargs: dict[str, Any]
    lr: float
    """The lr measured at: the constructor's default (Prodigy's 1.0 is part of its design),
    else 1e-3."""
    hessian: bool = False
    """``step`` takes ``hessian=`` (SophiaH): a ``g ⊙ g`` estimate is passed."""
    group: dict[str, Any] = field(default_factory=dict)
    """Keys of the parameter group (NorMuon's ``use_muon=True``)."""

    def build(self, params: list, lr: float, eps: tuple[str, int | None, Any] | None = None):
        kwargs = dict(self.kwargs)
        kwargs["lr"] = lr
        if eps is not None:
            key, index, value = eps
            if index is None:
                kwargs[key] = value
            else:
                entries = list(kwargs.get(key, self.defaults().get(key)))
                entries[index] = value
                kwargs[key] = tuple(entries)
        groups = [{"params": params, **self.group}] if self.group else params
        try:
            return self.cls(groups, **kwargs)
        except Exception as exc:  # the user's class: any failure is bad input
            raise SpecError(f"{self.label}({_kw_text(kwargs)}) raised {first_line(exc)}") from None

    def defaults(self) -> dict[str, Any]:
        return constructor_defaults(self.cls)


def _kw_text(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


def constructor_defaults(cls: type) -> dict[str, Any]:
    try:
        sig = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return {}
    return {
        name: p.default
        for name, p in sig.parameters.items()
        if p.default is not inspect.Parameter.empty
    }


def _accepts_any(cls: type) -> bool:
    try:
        sig = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return True
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())


def load_target(
    text: str, kwargs: dict[str, Any] | None = None, group: dict[str, Any] | None = None
) -> Target:
    """Import ``MODULE.CLASS`` (or ``MODULE:CLASS``) and check ``kwargs`` against it.

    Every failure is a one-line :class:`SpecError`: no such module or attribute, not a
    ``torch.optim.Optimizer`` subclass, an argument the constructor does not take. JSON
    lists in ``kwargs`` become tuples (``betas``, ``eps``). ``group`` holds keys of the
    parameter group the measured tensor is passed in (``{"use_muon": True}``).
    """
    import importlib

    import torch

    text = text.strip()
    if ":" in text:
        module_name, _, attr = text.rpartition(":")
    else:
        module_name, _, attr = text.rpartition(".")
    if not module_name or not attr:
        raise SpecError(
            f"{text!r}: expected MODULE.CLASS, e.g. torch.optim.AdamW or pytorch_optimizer.Lion"
        )
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise SpecError(f"{text}: no module named {exc.name!r} (is it installed?)") from None
        raise SpecError(f"{text}: importing {module_name} raised {first_line(exc)}") from None
    except Exception as exc:
        raise SpecError(f"{text}: importing {module_name} raised {first_line(exc)}") from None
    except SystemExit as exc:  # the module's own sys.exit() must not become ours
        raise SpecError(f"{text}: importing {module_name} called sys.exit({exc.code!r})") from None
    cls = getattr(module, attr, None)
    if cls is None:
        found = sorted(
            n
            for n, v in vars(module).items()
            if isinstance(v, type) and issubclass(v, torch.optim.Optimizer) and not n.startswith("_")
        )
        listing = ", ".join(found[:12]) + (", ..." if len(found) > 12 else "")
        raise SpecError(
            f"{text}: {module_name} has no attribute {attr!r}"
            + (f"; its optimizers: {listing}" if found else "")
        )
    if not (isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)):
        raise SpecError(f"{text}: a {type(cls).__name__}, not a torch.optim.Optimizer subclass")
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in (kwargs or {}).items()}
    defaults = constructor_defaults(cls)
    if not _accepts_any(cls):
        unknown = sorted(set(kwargs) - set(defaults))
        if unknown:
            names = ", ".join(n for n in defaults if n not in ("params",))
            raise SpecError(f"{text} takes no argument {unknown[0]!r}; its arguments: {names}")
    for reserved in ("lr", "params"):
        if reserved in kwargs:
            raise SpecError(
                f"--kwargs {reserved!r}: the measurement sets it (the update is measured per "
                "unit of lr); leave it out"
            )
    if "weight_decay" in defaults and "weight_decay" not in kwargs:
        kwargs["weight_decay"] = 0.0  # the declaration is of A, without the λW term
    lr = defaults.get("lr")
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
        lr = 1e-3
    try:
        step_params = inspect.signature(cls.step).parameters
    except (TypeError, ValueError):
        step_params = {}
    group = dict(group or {})
    if "params" in group:
        raise SpecError("--group 'params': the measurement supplies the parameter")
    label = f"{module_name}.{attr}"
    return Target(label, cls, kwargs, float(lr), hessian="hessian" in step_params, group=group)
