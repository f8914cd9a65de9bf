"""Reading a model: its family, each parameter's role and growing dimensions, its ties.

:mod:`~spectral.torch.model.shapes` (which dimensions grow, from a twin at another width),
:mod:`spectral.engine.ties` (which shared parameters the rules allow; torch-free, JAX reads it too),
:mod:`~spectral.torch.model.classify` (family and roles) and
:mod:`~spectral.torch.model.placement` (all of it, once per model: a :class:`Placement`).
The families themselves are data in :mod:`spectral.families`.
"""
