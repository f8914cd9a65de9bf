"""Applying the rules to a placed model: multiplier hooks, init, the hook-free form, export.

:mod:`~spectral.torch.apply.hooks` (the block multipliers as forward hooks),
:mod:`~spectral.torch.apply.absorb` (the hook-free form: carriers and their numbers),
:mod:`~spectral.torch.apply.init` (initialisation by role) and
:mod:`~spectral.torch.apply.export` (the multipliers folded into the weights).
"""
