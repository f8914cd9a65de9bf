"""The derivation engine: a declaration's conditions imposed, solved and verified.

The data flow, one module each: :mod:`~spectral.engine.theta` (Θ-values: exponents of the
width and depth) → :mod:`~spectral.engine.expr` (an update-size expression read without
``eval``) → :mod:`~spectral.engine.roles` (the parameters the paper's network has) →
:mod:`~spectral.engine.conditions` (the spectral conditions per role and block depth) →
:mod:`~spectral.engine.solve` (the exponents that satisfy them) →
:mod:`~spectral.engine.verify` (every condition term substituted back) →
:mod:`~spectral.engine.result` (the frozen :class:`~spectral.engine.result.Derivation`).
:mod:`~spectral.engine.spec_file` reads a user's TOML declaration. The public entry is
:func:`spectral.derive`.
"""
