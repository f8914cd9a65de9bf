"""Running optimizers: real implementations, one Optimizer over several, FSDP2, experts.

:mod:`~spectral.torch.optim.factories` (the real implementations by name),
:mod:`~spectral.torch.optim.sharded` (FSDP2's DTensor parameters),
:mod:`~spectral.torch.optim.composite` (one torch Optimizer over several),
:mod:`~spectral.torch.optim.experts` (stacked expert tensors, one slice per expert),
:mod:`~spectral.torch.optim.groups` (param groups with each role's numbers) and
:mod:`~spectral.torch.optim.torchtitan` (the same groups as torchtitan's configs).
"""
