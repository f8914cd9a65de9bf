"""The optimizer catalog: one module per optimizer, listed here explicitly.

Each ``optimizers/<name>.py`` (installed as ``spectral.optimizers.<name>``) holds everything
about one optimizer: its declaration ``SPEC`` (the update rule it idealises, the paper
section), ``TORCH`` (the real torch implementation and how it was checked), ``JAX`` (the
optax one, or why none), and ``PROBE`` (how ``spectral probe`` builds it); the last three,
records of :mod:`.entry`, are built by a function ``_records()`` the first time one is read
(:func:`records_on_first_use`: deriving needs ``SPEC`` alone). To add an optimizer, write
that file (``optimizers/adamw.py`` shows the form) and add its module name to
:data:`MODULES`; the test suite is parametrised over the catalog, so the new entry is
derived, verified, rendered, code-generated and checked for completeness the moment it is
listed.

Importing this package imports nothing else: :mod:`spectral.catalog` loads the modules
(their declarations need sympy), while the runtimes read only :mod:`.entry`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

PAPER = ("muon_kimi", "muon", "shampoo", "soap", "sgd", "adamw", "lion", "sophia", "sso")
"""The optimizers the paper tabulates, in its order."""

MORE = (
    "adam",
    "nadam",
    "radam",
    "adafactor",
    "adopt",
    "adan",
    "mars",
    "schedulefree_adamw",
    "lamb",
    "signsgd",
    "scion",
    "normuon",
)
"""Optimizers people install (torch.optim, pytorch-optimizer), declared from their papers and
checked against their implementations (``spectral probe``, ``spectral infer``)."""

MODULES = PAPER + MORE
"""Every catalog module, in catalog order."""

__all__ = ["MODULES", "MORE", "PAPER", "records_on_first_use"]


def records_on_first_use(
    module: str, build: Callable[[], dict[str, Any]]
) -> Callable[[str], Any]:
    """The ``__getattr__`` (PEP 562) of catalog module ``module``: the first read of a name
    it lacks builds its implementation records (``build()``: ``TORCH``, ``PROBE``, ``JAX``)
    into it, so later reads are plain attributes. ``spectral derive`` reads ``SPEC`` alone
    and never builds them (creating :mod:`.entry`'s four dataclasses was about a tenth of
    what it adds to sympy's import)."""

    def __getattr__(name: str) -> Any:
        namespace = sys.modules[module].__dict__
        if name.startswith("__") or "TORCH" in namespace:  # built, or a probe for a dunder
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        namespace.update(build())
        if name not in namespace:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        return namespace[name]

    return __getattr__
