"""A generated config's API: its numbers (TorchRules) and the functions that apply them.

``spectral codegen`` writes ``CONFIG = Config(...)`` and binds ``hparams = CONFIG.hparams``
and so on, so a user calls plain functions. This module is the public binding, and the only
code that reads a model from its arguments: each method places the model once
(:func:`~spectral.torch.model.placement.place`, which keeps the :class:`Placement` on the
model as ``model.spectral_placement``) and passes that value to the runtime function of the
module that owns the concern, which takes ``(rules, placement, width, depth, ...)``. The
user's ``patterns=`` (regular expression -> role, tried first) and ``adapter=`` (an
Adapter, a family name or a dict of its fields) are read here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from spectral.errors import ConfigTypeError, UnsupportedModelError
from spectral.scaling import BaseValue
from spectral.torch.apply.absorb import clip_by_hooked_norm, hparams_by_parameter
from spectral.torch.apply.export import fold_into_weights
from spectral.torch.apply.hooks import MultiplierHandle, final_of, install_multipliers
from spectral.torch.apply.init import init_by_role, role_init_factors
from spectral.torch.check.model import check_model
from spectral.torch.check.verdict import WidthReport
from spectral.torch.check.widths import checked_sizes, checked_timeout, widths_report
from spectral.torch.model.classify import AdapterLike, Patterns, as_adapter
from spectral.torch.model.placement import Placement, place
from spectral.torch.model.shapes import record_shapes_at_base
from spectral.torch.optim.composite import CompositeOptimizer
from spectral.torch.optim.groups import build_composite, role_param_groups
from spectral.torch.rules import TorchRules


class Config(TorchRules):
    """One config's rules with the runtime's functions bound to them."""

    def apply_multipliers(
        self,
        model: nn.Module,
        width: float,
        depth: float,
        *,
        multiplier: BaseValue = 1.0,
        adapter: AdapterLike | None = None,
        patterns: Patterns | None = None,
        example_input: Any = None,
    ) -> MultiplierHandle:
        """Install the block multipliers on any nn.Module without editing its source.

        alpha_in scales the embedding output, alpha_hidden the end of every residual
        branch (attention output and MLP down projection: two per layer, so `depth` counts
        layers), alpha_out the logits, each as a forward hook holding a plain float (on an
        input module that multiplies its output by a built-in factor, Gemma's sqrt(n), the
        hook divides that out: the adapter's input_scale). The family is recognised by
        the model's traced structure and module names, or given as adapter=Adapter(...) /
        a dict of its fields. Calling it again replaces the hooks (never scales twice).
        Every parameter must have a role: one error names each one that has none.
        ``example_input``: what the model's forward takes, for the one traced forward
        pass where no family's names place it and no batch can be built for it (the first
        call that reads the model needs it; the placement is kept on the model).
        """
        placement = place(
            model, self, patterns=patterns, adapter=adapter, example_input=example_input
        )
        return install_multipliers(self, placement, width, depth, multiplier=multiplier)

    def init_(
        self,
        model: nn.Module,
        width: float,
        depth: float,
        init_std: BaseValue | None = None,
        *,
        patterns: Patterns | None = None,
        adapter: AdapterLike | None = None,
        example_input: Any = None,
        multiplier: BaseValue = 1.0,
    ) -> None:
        """Initialise every parameter by its role, keeping the model's own base by default.

        ``init_std=None`` (the default): the model's own initialisation is the base. Each
        parameter the rules cover is multiplied by ``init_ratio(role, width, depth)``, its
        role's std at this size divided by its std at the base size, so at the base width and
        depth every parameter stays bit for bit as the model's code (``reset_parameters``,
        Hugging Face's ``_init_weights``, torchtitan's ``init_weights``) left it, and away
        from it each is that value times the rule's ratio (as microsoft/mup's set_base_shapes
        keeps the base model's). sigma_base is thus the model's own, per parameter: call this
        after the model's own init. A second call at the same size on values init_ left
        untouched scales nothing (check() reads what init_ did: :func:`init_record`). The law
        assumes the model's own std does not itself change with the width (Hugging Face's
        initializer_range, nanoGPT's 0.02); where it does (torch's default 1/sqrt(fan_in) of
        nn.Linear and nn.ConvNd, recognised by its values; a family's own_width_exponents),
        that change is divided out: the parameter starts at its std at the base width times
        the rule's ratio (spectral.torch.model.own_init).

        ``init_std`` given (a number, or a dict keyed by role, optimizer or "default"): the
        model's values are replaced by draws from N(0, init_std_of(role)^2), as before this
        became the default: see :func:`draw_by_role`.

        Biases are scaled by their role's ratio like the weights (1 for the derived rules: the
        bias variance does not move with the width). A norm's gain and bias keep the model's
        values: a gain has no width rule, and models start it at 1 (the draw sets it to 1).
        A vector that is neither a bias nor a norm gain (Mamba's A_log and D, a depthwise
        kernel) keeps its values in both forms. In the hook-free form (a config generated
        with --absorb-multipliers) the parameters of each module a multiplier scaled carry it:
        their values times the multiplier, a norm's included (spectral.torch.apply.absorb).
        """
        placement = place(
            model, self, patterns=patterns, adapter=adapter, example_input=example_input
        )
        init_by_role(self, placement, width, depth, init_std, multiplier=multiplier)

    def init_factors(
        self,
        model: nn.Module,
        width: float,
        depth: float,
        *,
        patterns: Patterns | None = None,
        adapter: AdapterLike | None = None,
        example_input: Any = None,
        multiplier: BaseValue = 1.0,
    ) -> dict[str, float]:
        """Parameter name -> the factor ``init_`` (with no ``init_std``) multiplies it by:
        its role's init_ratio times its carrier factor (hook-free form); a norm's
        parameters only the carrier factor (1.0 outside the carriers); 1.0 for a vector
        that keeps its own values."""
        placement = place(
            model, self, patterns=patterns, adapter=adapter, example_input=example_input
        )
        return role_init_factors(self, placement, width, depth, multiplier=multiplier)

    def param_groups(
        self,
        model: nn.Module,
        width: float,
        depth: float,
        *,
        patterns: Patterns | None = None,
        adapter: AdapterLike | None = None,
        example_input: Any = None,
        **base: Any,
    ) -> list[dict[str, Any]]:
        """Torch param groups, one per (optimizer, role, compensation), with scaled HPs.

        Each group carries "lr", "weight_decay", the optimizer's eps where it has one, and
        "role" / "optimizer" for bookkeeping. An eps that lives inside a tuple-valued key
        (rules.eps_places) is carried as "spectral_eps" and put in place by build_optimizers, once
        the implementation has filled in the tuple's other entries. init_std is accepted
        (and ignored) so one dict of base values serves every function; multiplier only matters
        in the hook-free form.
        Frozen parameters are left out. Each group is named "role/optimizer" (what loggers show),
        with the lr factor of a shape compensation or "experts" after it where a role has
        several groups. A one-element tensor lr (torch's recipe for a compiled optimizer step,
        which then does not recompile as the lr changes) gives every group a tensor lr of its
        own, of that dtype and device. In the hook-free form the parameters of each module a
        multiplier scaled get groups of their own, with the numbers that carry it
        (spectral.torch.apply.absorb).
        """
        placement = place(
            model, self, patterns=patterns, adapter=adapter, example_input=example_input
        )
        return role_param_groups(self, placement, width, depth, **base)

    def build_optimizers(
        self,
        model: nn.Module,
        width: float,
        depth: float,
        *,
        factories: Mapping[str, Callable[..., torch.optim.Optimizer]] | None = None,
        optimizer_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
        patterns: Patterns | None = None,
        adapter: AdapterLike | None = None,
        example_input: Any = None,
        multipliers_in_forward: bool | None = None,
        **base: Any,
    ) -> CompositeOptimizer:
        """One torch optimizer over param_groups(model, width, depth, **base).

        The model's forward pass must carry the block multipliers (apply_multipliers, or a
        model that applies them itself: pass multipliers_in_forward=True, or give the model an
        attribute applies_mup_multipliers = True as spectral.models does); without them the
        rules do not hold, so this refuses. optimizer_kwargs = {"adamw": {"betas": (0.9,
        0.95)}} passes extra arguments to one implementation; factories = {"name": fn}
        replaces or adds one (fn(groups, **kwargs) returning a torch optimizer).
        """
        placement = place(
            model, self, patterns=patterns, adapter=adapter, example_input=example_input
        )
        return build_composite(
            self,
            placement,
            width,
            depth,
            factories=factories,
            optimizer_kwargs=optimizer_kwargs,
            multipliers_in_forward=multipliers_in_forward,
            **base,
        )

    def check(
        self,
        model: nn.Module,
        width: float,
        depth: float,
        optimizer: torch.optim.Optimizer | None = None,
        *,
        multiplier: BaseValue = 1.0,
        head_dim: int | None = None,
        patterns: Patterns | None = None,
        adapter: AdapterLike | None = None,
        example_input: Any = None,
        measure: bool = True,
        widths: Sequence[int] | None = None,
        factory: Callable[[int], nn.Module] | None = None,
        timeout: float | None = 120.0,
        seeds: int = 1,
        trainer: Any = None,
        **base: Any,
    ) -> list[str]:
        """Problems found on the model and optimizer (a :class:`Findings` list: [] when
        all is right; ``notes``: what was not judged). Roles, ties, multipliers, init stds
        (spectral.torch.check.params), optimizer groups, head_dim; measure=True runs the
        model (.forward, .compiled); widths=[...] checks twins anchored on it (.widths,
        .anchor), set up through the model's own placement and init_."""
        if not isinstance(model, nn.Module):
            raise ConfigTypeError(
                f"model must be a torch.nn.Module, got {type(model).__name__}"
            )
        placed: Placement | str
        try:
            placed = place(
                model,
                self,
                patterns=patterns,
                adapter=adapter,
                example_input=example_input,
            )
            placed.roles()  # every parameter placed, ties allowed
        except UnsupportedModelError as exc:  # found on the model: one line
            placed = str(exc)
        return check_model(
            self,
            placed,
            width,
            depth,
            optimizer,
            given=model,
            multiplier=multiplier,
            head_dim=head_dim,
            example_input=example_input,
            measure=measure,
            widths=widths,
            factory=factory,
            timeout=timeout,
            seeds=seeds,
            trainer=trainer,
            **base,
        )

    def fold_multipliers(
        self,
        model: nn.Module,
        width: float,
        depth: float,
        *,
        multiplier: BaseValue = 1.0,
        adapter: AdapterLike | None = None,
    ) -> list[str]:
        """Fold every multiplier hook into its module's parameters and remove the hooks.

        The hooks must be the rules' at (width, depth) (apply_multipliers with these sizes);
        returns the names of the modules folded. After it the model needs no hooks: save it
        for serving. It refuses, changing nothing, a model whose multipliers are built into
        its forward pass, a hooked module whose output is not linear in its parameters, and a
        parameter shared with another module (tied embeddings: alpha_out would scale the input
        too; untie them, or keep the hook and scale the logits where you serve).
        """
        placement = place(model, self, adapter=adapter)
        return fold_into_weights(self, placement, width, depth, multiplier=multiplier)

    set_base_shapes = record_shapes_at_base

    def clip_grad_norm_(
        self,
        model: nn.Module,
        width: float,
        depth: float,
        max_norm: float,
        *,
        norm_type: float = 2.0,
        multiplier: BaseValue = 1.0,
        adapter: AdapterLike | None = None,
    ) -> torch.Tensor:
        """``torch.nn.utils.clip_grad_norm_`` as the hooked form clips: returns the total
        norm (spectral.torch.apply.absorb.clip_by_hooked_norm says how the hook-free form
        gets the hooked run's clip)."""
        # the hooked form clips as torch does: no placement read on every step
        placed = None if self.absorbed is None else place(model, self, adapter=adapter)
        return clip_by_hooked_norm(
            self,
            placed,
            width,
            depth,
            max_norm,
            norm_type=norm_type,
            multiplier=multiplier,
            given=model,
        )


def check_widths(
    rules: TorchRules,
    model: nn.Module,
    widths: list[int],
    *,
    anchor: tuple[float, float] | None = None,
    factory: Callable[[int], nn.Module] | None = None,
    adapter: AdapterLike | None = None,
    patterns: Patterns | None = None,
    multiplier: BaseValue = 1.0,
    example_input: Any = None,
    timeout: float | None = 120.0,
    base: Mapping[str, Any] | None = None,
    seeds: int = 1,
) -> WidthReport:
    """Twins of ``model`` at ``widths`` measured; the report's problems are [] only when
    every module was measured at every width and is within SLOPE_TOLERANCE_WIDTHS of its rules.

    ``timeout``: seconds for the whole check; the anchor and each twin run under an alarm
    for the time left (a slow forward pass or factory is interrupted, in the main thread),
    and the widths left are named as not measured. ``seeds``: twins drawn per width (1 to MAX_SEEDS; init seeds 0, 1, ...);
    each RMS is their mean before the slope is fitted. At a few heads of width one draw's
    branch slopes scatter by about 0.1 from seed to seed, so a check near the tolerance
    wants several (the cost grows with them); with two or more a line states the 95 %
    interval over the draws, and none is issued where it holds the rule. ``anchor``: the user's (width, depth); the
    model is first compared with the twin at its own width (spectral.torch.check.anchor),
    so that what the verdict certifies is the model trained. A bad argument raises
    ConfigError."""
    checked_sizes(widths, seeds, base or {})  # a bad argument raises before any work
    checked_timeout(timeout)
    placement = place(
        model, rules, patterns=patterns, adapter=adapter, example_input=example_input
    )
    return widths_report(
        rules,
        placement,
        widths,
        anchor=anchor,
        factory=factory,
        multiplier=multiplier,
        example_input=example_input,
        timeout=timeout,
        base=base,
        seeds=seeds,
    )


def parameter_hparams(
    rules: TorchRules,
    model: nn.Module,
    width: float,
    depth: float,
    *,
    patterns: Patterns | None = None,
    adapter: AdapterLike | None = None,
    **base: Any,
) -> dict[str, dict[str, Any]]:
    """Parameter name -> role, optimizer, carrier factor and the numbers init_ and
    build_optimizers give it (init_std before a dense input layer's 1/sqrt(d_in); a norm's
    gain starts at the carrier factor, or 1, whatever init_std says)."""
    placement = place(model, rules, patterns=patterns, adapter=adapter)
    return hparams_by_parameter(rules, placement, width, depth, **base)


def final_module(
    model: nn.Module, adapter: AdapterLike | None = None
) -> nn.Module | None:
    """The module whose input is h_L (the residual stream after the last block), for
    coordinate checks; None when the family does not say."""
    return final_of(model, as_adapter(adapter, model))


@torch.no_grad()
def titan_init(
    rules: TorchRules,
    model: nn.Module,
    width: float,
    depth: float,
    init_std: BaseValue | None = None,
    *,
    multiplier: BaseValue = 1.0,
    adapter: AdapterLike | None = "torchtitan",
) -> None:
    """init_ for torchtitan's Llama3, called after its own ``init_weights``.

    With no ``init_std``, torchtitan's init is the base (spectral.torch.apply.init): at the
    base width and depth every parameter is left bit for bit as torchtitan drew it; away
    from it each is multiplied by its role's std ratio and by the multiplier it carries.
    A parameter whose own std already moves with the width (the torchtitan adapter's
    own_width_exponents: lm_head at dim**-0.5) also gets that move divided out,
    (width / base_width)**0.5 for lm_head, so it starts at the std torchtitan gives it at
    the base width times the rule, as the rule means; without this the readout would
    start sqrt(base_width / width) smaller. ``init_std`` given: every parameter drawn by
    its role, as init_ does.
    """
    placement = place(model, rules, adapter=adapter)
    init_by_role(rules, placement, width, depth, init_std, multiplier=multiplier)
