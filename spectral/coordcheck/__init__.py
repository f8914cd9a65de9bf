"""Coordinate checks: train the reference models a few steps across widths and depths.

For each parameterization (``sp``, ``mup-k1``, ``mup``), each point of a width sweep (at
fixed depth) and of a depth sweep (at fixed width) and each seed, a reference model is
trained for ``steps`` steps on one fixed batch. After every step the RMS norm of the last
block's output ``‖h_L(t)‖_R``, of its change since initialisation ``‖h_L(t) − h_L(0)‖_R``
(same input batch), and of the network output and its change are recorded. The log–log
slope of each against width and against depth at the last step is fitted.

**Pass rule.** A slope passes when ``|slope| ≤ 0.15``
(:data:`~spectral.measure.fit.SLOPE_TOLERANCE_COORD`): the
quantity neither grows nor shrinks with width or depth by more than ``n^0.15`` / ``L^0.15``
across the sweep. μP parameterizations should pass; for ``sp`` the same test is reported
(it is expected to fail, which is the point of the comparison).

**Parameterizations.** Every point is built from the config module that
:mod:`spectral.codegen` generates (:func:`spectral.codegen.load_generated`), as the LR sweep
does: ``multipliers`` for the model, ``init_`` for the initialisation, ``build_optimizers``
for the real optimizer implementations (with their per-group compensations).

* ``sp`` — every ratio is 1: the ``mup`` module evaluated at ``(BASE_WIDTH, BASE_DEPTH)``
  (multipliers 1, base init std, base lr) at every width and depth. The base width and
  depth are the smallest of the sweep.
* ``mup-k1`` — the module generated with ``k = 1`` (Depth-μP style, ``α = 1/√L``).
* ``mup`` — the module generated with ``k = max(2, k)`` (CompleteP style, ``α = 1/L``).

``α_base`` (``--alpha-base``) multiplies the hidden blocks' multiplier only. ``init_std`` is
0.02 for the GPT and ``1/√n_base`` for the MLP, whose dense input layer ``init_`` draws with
``init_std/√d_in``; biases get their role's std, norm gains 1 and norm biases 0.

**Hybrids.** With a matrices-only optimizer (Muon, Muon-Kimi, Shampoo, SOAP, SSO), or when
``others`` is given, the hidden weight matrices use ``optimizer`` and every other parameter
(embeddings/input, readout, biases, LayerNorm) uses ``others`` (AdamW by default), each
under its own derived rules — the paper's Muon-Kimi-AdamW setup.

**Any optimizer.** ``spec`` (a declaration, e.g. from :func:`spectral.engine.spec_file.load_spec`)
replaces the catalog name ``optimizer``, and ``factory(param_groups, **kwargs)`` builds its
implementation: the generated module is rendered from the declaration and its
``build_optimizers`` gets ``factories={name: factory}``. A factory also replaces a catalog
optimizer's built-in implementation.

**Your own model.** ``model_factory(width, depth)`` replaces the reference models: any
``nn.Module`` that the generated module's adapters recognise (Hugging Face Llama/Qwen2/Mistral
and GPT-2, nanoGPT, or anything with those module names), taking a ``LongTensor`` of token
ids ``(B, T)`` and returning logits ``(B, T, V)`` or an object with ``.logits``. Every point
goes through the generated module as a user's training script would: ``apply_multipliers``
(forward hooks), ``init_`` and ``build_optimizers``; for ``sp`` the hooks hold the base
multipliers and ``init_`` / ``build_optimizers`` are evaluated at ``(BASE_WIDTH,
BASE_DEPTH)``. ``h_L`` is the input of ``final_module(model)`` (the final norm), caught with a
forward pre-hook; a model without one is measured on its logits, and the result says so
(``"h_metric"``). The loss is next-token cross entropy on one fixed random batch of
``seq_len + 1`` tokens below the model's vocabulary size (``config.vocab_size``, else the
readout's ``out_features``, else ``vocab_size``). For other inputs, ``batch_factory(batch,
seed)`` returns the batch: see :func:`user_batch`. The rules assume a head dimension that
stays fixed as the width grows, so a factory whose head dimension changes with width is
refused before anything is trained.

**Top-order term** (MLP only). Besides ``h_L`` the MLP check records the all-update term of
the residual blocks, ``‖Σ_l α_l ΔW_l^(k) D … D ΔW_l^(1) h_{l-1}‖_R`` (``D`` the ReLU masks
at step ``t``): for ``k ≥ 2`` blocks it is the higher-order term that the ``k ≥ 2``
conditions keep at ``Θ(1)`` and the ``k = 1`` rules let vanish like ``L^{-(k-1)/2}``
(App. B.1).

The slope fitting and the pass rule are pure functions (no torch); everything that needs
torch, rich or matplotlib is imported inside the functions that use it.

Layout: :mod:`~spectral.coordcheck.slopes` (the pass rule, pure),
:mod:`~spectral.coordcheck.config` (what a check runs), :mod:`~spectral.coordcheck.generated`
(the config module each point is built from), :mod:`~spectral.coordcheck.reference` and
:mod:`~spectral.coordcheck.user_model` (training one point), :mod:`~spectral.coordcheck.run`
(the whole check) and :mod:`~spectral.coordcheck.plot`.
"""

from __future__ import annotations

from .config import DEFAULT_ALPHA_BASE, DEFAULT_LR, GPT_DEFAULT_LR, CoordCheckConfig
from .generated import base_init_std, config_module
from .plot import plot_coord_check
from .reference import build, train_reference
from .run import run_coord_check, sweep_runs, train_one
from .slopes import (
    EXTRA_METRICS,
    METRICS,
    PARAMETERIZATIONS,
    SLOPE_TOLERANCE_COORD,
    aggregate,
    compute_slopes,
    divergence_text,
    diverged,
    judge,
    record_step,
    slope_passes,
)
from .user_model import build_user, inspect_user_model, make_user_model, train_user, user_batch

__all__ = [
    "SLOPE_TOLERANCE_COORD",
    "PARAMETERIZATIONS",
    "METRICS",
    "slope_passes",
    "aggregate",
    "record_step",
    "compute_slopes",
    "diverged",
    "divergence_text",
    "judge",
    "CoordCheckConfig",
    "run_coord_check",
    "plot_coord_check",
    # below the pure functions and the entry points: the pieces the tests and
    # spectral.coordcheck.jax use
    "DEFAULT_ALPHA_BASE",
    "DEFAULT_LR",
    "EXTRA_METRICS",
    "GPT_DEFAULT_LR",
    "base_init_std",
    "build",
    "build_user",
    "config_module",
    "inspect_user_model",
    "make_user_model",
    "sweep_runs",
    "train_one",
    "train_reference",
    "train_user",
    "user_batch",
]
