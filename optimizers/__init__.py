"""The optimizer catalog: one module per optimizer, listed here explicitly.

Each ``optimizers/<name>.py`` (installed as ``spectral.optimizers.<name>``) holds everything
about one optimizer: its declaration ``SPEC`` (the update rule it idealises, the paper
section), ``TORCH`` (the real torch implementation and how it was checked), ``JAX`` (the
optax one, or why none), and ``probe`` (how ``spectral probe`` builds it). To add an
optimizer, write that file and add its module name to :data:`MODULES`; the test suite is
parametrised over the catalog, so the new entry is derived, verified, rendered, code-generated
and checked for completeness the moment it is listed.

Importing this package imports nothing else: :mod:`spectral.catalog` loads the modules
(their declarations need sympy), while the runtimes read only :mod:`.entry`.
"""

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

__all__ = ["MODULES", "MORE", "PAPER"]
