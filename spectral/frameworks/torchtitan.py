"""torchtitan without glue: its own config system, optimizer container and per-module init.

A module written by ``spectral codegen --framework torchtitan`` binds :func:`mup_config`
to its rules as ``mup``, and answers torchtitan's ``ConfigManager`` as a config registry
(``--module mup_titan --config llama3_debugmodel``: torchtitan's Llama3 registry function of
that name, with ``mup`` applied). ``mup(config)`` changes a ``Trainer.Config`` in three
places, so that torchtitan's stock ``Trainer`` trains by the rules:

* ``config.optimizer`` becomes :class:`SpectralOptimizers.Config`, torchtitan's
  ``OptimizersContainer`` (its documented extension point) with the base values as its own
  fields: ``--optimizer.lr``, ``--optimizer.weight-decay``, ``--optimizer.eps``,
  ``--optimizer.betas`` (AdamW / Adam), ``--optimizer.momentum`` (Muon) are torchtitan CLI
  flags, and every group's numbers are computed from them when the container is built. It
  builds torch.optim.Muon by the name ``"Muon"`` besides torchtitan's own Adam and AdamW.
* the config's class gains a ``__post_init__`` (same name and fields) that copies the run's
  ``training.steps`` and ``training.global_batch_size`` into the container's config once
  torchtitan's ConfigManager has read the command line, so the rules along the horizon
  and the batch apply against the module's BASE_RUN.
* every ``param_init`` of the model config is wrapped so that torchtitan's own draw is
  multiplied by the rule's factor (``titan_init_factors``): at the base width and depth
  the model starts as torchtitan draws it, bit for bit; away from it, times the ratio.

This module imports torchtitan (and tyro, which torchtitan uses): nothing under
``spectral.torch`` imports it, so the vendored torch runtime never needs torchtitan.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

import torch
import tyro
from torch import nn
from torch.distributed.tensor import DTensor
from torchtitan.components.optimizer import OptimizersContainer, ParamGroupConfig
from torchtitan.models.common.param_init import skip_param_init
from torchtitan.protocols.module import Module
from torchtitan.tools.logging import logger

from spectral.errors import ConfigError, UnsupportedModelError
from spectral.scaling import BIAS_ROLES, BaseValue
from spectral.torch.apply.init import record_init, role_init_factors
from spectral.torch.model.placement import place
from spectral.torch.optim.torchtitan import (
    GroupPattern,
    param_group_configs,
)
from spectral.torch.rules import TorchRules

__all__ = [
    "EXTRA_FACTORIES",
    "ScaledInit",
    "SpectralOptimizers",
    "TitanSetup",
    "install_init",
    "mup_config",
    "registry_function",
    "titan_init_factors",
]

EXTRA_FACTORIES: dict[str, Callable[..., torch.optim.Optimizer]] = {"Muon": torch.optim.Muon}
"""Optimizers :class:`SpectralOptimizers` builds by name besides torchtitan 0.3.0's own
(Adam, AdamW, DistMuon): torch.optim.Muon, Muon-Kimi's implementation."""

REGISTRY_MODULE = "torchtitan.models.llama3.config_registry"
"""Where a generated module looks up the registry functions it answers for: the patterns
are those of torchtitan's Llama3."""


CLIP_NOTE = (
    "spectral: torchtitan clips the global gradient norm at training.max_norm = "
    "{max_norm}, taken in the hook-free coordinates, not the hooked model's: where the "
    "clip binds, runs away from the base width and depth are scaled differently from the "
    "hooked form. For the exact clip: --training.max-norm inf --optimizer.max-norm "
    "{max_norm} (docs/torchtitan.md)"
)
"""The warning :func:`mup_config` logs when torchtitan's own clip is on."""


@dataclass(frozen=True)
class TitanSetup:
    """What a generated module hands torchtitan: its rules, group patterns and names."""

    rules: Any
    groups: tuple[GroupPattern, ...]
    optimizer_names: Mapping[str, str]
    adapter: str = "torchtitan"

    def to_dict(self) -> dict[str, Any]:
        """What torchtitan's config dump (``Config.to_dict``) shows of it."""
        return {
            "base_width": self.rules.base_width,
            "base_depth": self.rules.base_depth,
            "optimizers": dict(self.rules.optimizers),
            "groups": [list(g) for g in self.groups],
        }


class SpectralOptimizers(OptimizersContainer):
    """torchtitan's ``OptimizersContainer`` with the rules' param groups, computed when it
    is built from the base values in its own config (so they are torchtitan CLI flags)."""

    @dataclass(kw_only=True, slots=True)
    class Config(OptimizersContainer.Config):
        param_groups: Annotated[list[ParamGroupConfig], tyro.conf.Suppress] = field(
            default_factory=list
        )
        """Computed when the container is built: one group per role and carrier."""

        lr: float = 8e-4
        """Base learning rate (at the config's base width and depth), every group
        scaled from it."""

        weight_decay: float = 0.1
        """Base weight decay of the weight roles."""

        bias_weight_decay: float | None = None
        """Base weight decay of the norm gains (the bias roles); None: weight_decay, as
        torchtitan's default_adamw decays every parameter."""

        eps: float = 1e-8
        """Base epsilon of AdamW / Adam, scaled by its rule."""

        betas: tuple[float, float] = (0.9, 0.95)
        """AdamW / Adam betas at the base run (a batch law moves them); torchtitan's
        default_adamw's."""

        momentum: float = 0.95
        """Muon's momentum (no rule moves it)."""

        nesterov: bool = True
        """Muon's Nesterov momentum."""

        max_norm: float = math.inf
        """Clip the global gradient norm of the *hooked* form at this before each step
        (spectral's exact clip, docs/torchtitan.md); inf: off. With it, turn torchtitan's
        own clip off (--training.max-norm inf). Not across pipeline stages."""

        width: Annotated[int, tyro.conf.Suppress] = 0
        """The model's width, set by ``mup`` from the model config."""

        depth: Annotated[int, tyro.conf.Suppress] = 0
        """The model's depth (layers), set by ``mup`` from the model config."""

        setup: Annotated[TitanSetup | None, tyro.conf.Suppress] = None
        """The generated module's rules, set by ``mup``."""

        steps: Annotated[int, tyro.conf.Suppress] = 0
        """The run's steps (``training.steps``), set once the command line is read; 0:
        the base run's."""

        batch: Annotated[int, tyro.conf.Suppress] = 0
        """The run's global batch in sequences (``training.global_batch_size`` where set);
        0: the base run's."""

    def __init__(self, config: Config, *, model_parts: list[nn.Module]) -> None:
        setup = config.setup
        if setup is None or config.width <= 0 or config.depth <= 0:
            raise ConfigError(
                "SpectralOptimizers.Config is set up by the generated module's "
                "mup(config): it reads the width, depth and rules from there"
            )
        _check_width(model_parts, config.width)
        _check_untied(model_parts)
        base_run = getattr(setup.rules, "base_run", None) or {}
        if "base_batch" in base_run and config.batch <= 0:
            logger.warning(BATCH_NOTE.format(base=base_run["base_batch"]))
        groups = param_group_configs(
            setup.rules,
            setup.groups,
            setup.optimizer_names,
            config.width,
            config.depth,
            options=_options(config, setup),
            **_base_values(config, setup),
        )
        super().__init__(dataclasses.replace(config, param_groups=groups), model_parts=model_parts)
        self.max_norm = config.max_norm
        self.carried = _carried(setup, model_parts, config.width, config.depth)
        # torchtitan's Trainer ran the scaled param_init entries (install_init) before it
        # built this container: what init_ would have done, recorded for check()
        if len(model_parts) == 1:
            record_init(model_parts[0], config.width, config.depth)
        self.hooked_norm: torch.Tensor | None = None

    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        if math.isfinite(self.max_norm):
            self.hooked_norm = self.clip_hooked_norm(self.max_norm)
        return super().step(closure)

    @torch.no_grad()
    def clip_hooked_norm(self, max_norm: float) -> torch.Tensor:
        """Scale every gradient as torch's clip_grad_norm_ would scale the hooked form's:
        the norm is that of the hooked gradients (a carrier's gradient times its
        multiplier s), reduced over each sharded (DTensor) gradient's mesh once per value
        of s; returns it. What clip_by_hooked_norm does, for torchtitan's parameters."""
        by_factor: dict[float, list[torch.Tensor]] = {}
        params = [p for part in self.model_parts for p in part.parameters()]
        for p in params:
            if p.grad is not None:
                by_factor.setdefault(self.carried.get(id(p), 1.0), []).append(p.grad)
        norms = []
        for s, grads in sorted(by_factor.items()):
            norm = torch.nn.utils.get_total_norm(grads, 2.0, False, True)
            if isinstance(norm, DTensor):
                norm = norm.full_tensor()
            norms.append(norm * s)
        total = torch.linalg.vector_norm(torch.stack(norms)) if norms else torch.tensor(0.0)
        torch.nn.utils.clip_grads_with_norm_(params, max_norm, total, foreach=True)
        return total

    @staticmethod
    def _resolve_optimizer_factory(name: str) -> Callable[..., torch.optim.Optimizer]:
        if name in EXTRA_FACTORIES:
            return EXTRA_FACTORIES[name]
        return OptimizersContainer._resolve_optimizer_factory(name)


def _carried(
    setup: TitanSetup, model_parts: list[nn.Module], width: int, depth: int
) -> dict[int, float]:
    """id(parameter) -> the multiplier it carries (the first group pattern its name
    matches, where that group carries one), for the parameters that carry one."""
    folded = setup.rules.folded_multipliers(width, depth)
    out: dict[int, float] = {}
    for part in model_parts:
        for name, p in part.named_parameters():
            group = next((g for g in setup.groups if re.search(g[0], name)), None)
            if group is not None and group[2] is not None:
                out[id(p)] = folded[group[2]]
    return out


def _base_values(config: SpectralOptimizers.Config, setup: TitanSetup) -> dict[str, Any]:
    """The container's fields as spectral's base values."""
    bias_wd = config.weight_decay if config.bias_weight_decay is None else config.bias_weight_decay
    bias_roles = sorted(r for r in setup.rules.optimizers if r in BIAS_ROLES)
    wd = {"default": config.weight_decay, **dict.fromkeys(bias_roles, bias_wd)}
    run: dict[str, Any] = {}
    base_run = getattr(setup.rules, "base_run", None) or {}
    if config.steps > 0 and ("base_steps" in base_run or "base_tokens" in base_run):
        run["steps"] = config.steps
    if config.batch > 0 and "base_batch" in base_run:
        run["batch"] = config.batch
    return {"lr": config.lr, "weight_decay": wd, "eps": config.eps, **run}


def _options(config: SpectralOptimizers.Config, setup: TitanSetup) -> dict[str, Any]:
    """The options no rule moves, for the optimizers this config builds."""
    known: dict[str, dict[str, Any]] = {
        "AdamW": {"betas": tuple(config.betas)},
        "Adam": {"betas": tuple(config.betas)},
        "Muon": {"momentum": config.momentum, "nesterov": config.nesterov},
    }
    names = set(setup.optimizer_names.values())
    return {name: known[name] for name in sorted(names) if name in known}


TIED = (
    "the model config has enable_weight_tying=True (tok_embeddings and lm_head one matrix): "
    "the torchtitan target absorbs alpha_in into the embedding and alpha_out into the head, "
    "which one matrix cannot both carry; set enable_weight_tying=False in the model config"
)
"""The refusal of a tied Llama (torchtitan's 1B and 3B configs tie): one line."""


HEAD_OR_EMBEDDING = ("lm_head.weight", "tok_embeddings.weight")


def _check_untied(model_parts: list[nn.Module]) -> None:
    """Refuse model parts whose embedding and head share their matrix."""
    for part in model_parts:
        seen: dict[int, str] = {}
        for name, p in part.named_parameters(remove_duplicate=False):
            both = (seen.get(id(p), ""), name)
            if id(p) in seen and any(n.endswith(HEAD_OR_EMBEDDING) for n in both):
                raise UnsupportedModelError(TIED)
            seen.setdefault(id(p), name)


def _check_width(model_parts: list[nn.Module], width: int) -> None:
    """Refuse a container whose width is not the model's (its embedding or head)."""
    for part in model_parts:
        for name, p in part.named_parameters():
            if name.endswith(("tok_embeddings.weight", "lm_head.weight")):
                if p.shape[-1] != width:
                    raise UnsupportedModelError(
                        f"the optimizer's width is {width}, and {name} has {p.shape[-1]} "
                        "columns: build the config with mup(config) after the model is set"
                    )


def titan_init_factors(
    rules: TorchRules,
    model: nn.Module,
    width: float,
    depth: float,
    *,
    multiplier: BaseValue = 1.0,
    adapter: Any = "torchtitan",
) -> dict[str, float]:
    """Parameter name -> the factor ``titan_init`` multiplies torchtitan's own draw
    by: ``init_factors`` (the role's std ratio times the multiplier a carrier holds; for a
    parameter whose own std moves with the width, the torchtitan adapter's
    own_width_exponents, that move divided out). Reads names and shapes only: ``model``
    may live on the meta device, so torchtitan's per-module ``param_init`` can be scaled
    before anything is allocated (install_init)."""
    placement = place(model, rules, adapter=adapter)
    return role_init_factors(rules, placement, width, depth, multiplier=multiplier)


class ScaledInit:
    """A torchtitan ``param_init`` entry times a factor: ``init(p)``, then ``p *= factor``."""

    def __init__(self, init: Callable[[torch.Tensor], Any], factor: float) -> None:
        self.init, self.factor = init, factor

    def __call__(self, param: torch.Tensor) -> None:
        self.init(param)
        with torch.no_grad():
            param.mul_(self.factor)

    def __repr__(self) -> str:
        return f"ScaledInit({self.init!r}, {self.factor!r})"


def _meta_model(model_config: Any) -> nn.Module:
    with torch.device("meta"):
        return model_config.build()


def install_init(setup: TitanSetup, model_config: Any, width: int, depth: int) -> dict[str, float]:
    """Wrap every ``param_init`` of ``model_config`` (in place) so that torchtitan's own
    draw is multiplied by the rule's factor; returns name -> factor for every parameter.

    The factors come from a copy built on the meta device (names and shapes only). A
    factor of 1 leaves the entry as it was (bit for bit torchtitan's at the base); an entry
    that skips its parameter (``skip_param_init``, a tied weight) is left alone. A
    parameter with a factor other than 1 and no ``param_init`` entry is refused: its module
    would be initialised by ``reset_parameters``, which this cannot scale.
    """
    model = _meta_model(model_config)
    factors = titan_init_factors(setup.rules, model, width, depth, adapter=setup.adapter)
    covered: set[str] = set()
    for fqn, cfg, _, _ in model_config.traverse(Module.Config, recurse=True):
        inits = getattr(cfg, "param_init", None)
        if not isinstance(inits, dict):
            continue
        scaled = dict(inits)  # a copy: torchtitan shares these dicts between modules
        for key, init in inits.items():
            name = f"{fqn}.{key}" if fqn else key
            if name not in factors:
                continue
            covered.add(name)
            if factors[name] != 1.0 and init is not skip_param_init:
                scaled[key] = ScaledInit(init, factors[name])
        cfg.param_init = scaled
    missing = sorted(n for n, f in factors.items() if f != 1.0 and n not in covered)
    if missing:
        raise UnsupportedModelError(
            f"no param_init entry for {', '.join(missing)}: the model config must give "
            "each scaled parameter one (torchtitan's Llama3 does)"
        )
    return factors


def _own_optimizer_values(optimizer: Any) -> dict[str, Any]:
    """lr, betas, eps and weight decay of a catch-all group (``default_adamw``'s), as
    the container's base values: the registry function's own setup at the base."""
    groups = getattr(optimizer, "param_groups", None) or []
    if len(groups) != 1 or groups[0].optimizer_name not in ("AdamW", "Adam"):
        return {}
    kwargs = groups[0].optimizer_kwargs
    keys = {"lr": "lr", "betas": "betas", "eps": "eps", "weight_decay": "weight_decay"}
    return {field: kwargs[key] for field, key in keys.items() if key in kwargs}


def mup_config(
    rules: Any,
    groups: tuple[GroupPattern, ...],
    optimizer_names: Mapping[str, str],
    config: Any,
) -> Any:
    """torchtitan's ``Trainer.Config`` trained by the rules: its optimizer becomes
    :class:`SpectralOptimizers.Config` (lr, betas, eps, weight decay and the
    implementation kept from a catch-all ``default_adamw`` group; the width and depth read
    from the model config: ``dim`` and ``len(layers)``) and its model's ``param_init``
    entries are scaled (:func:`install_init`); once the command line is read, the run's
    ``training.steps`` and ``training.global_batch_size`` reach the container
    (:func:`_run_class`), so the rules along the horizon and the batch apply against the
    module's BASE_RUN. Returns ``config``, changed in place."""
    if isinstance(config.optimizer, SpectralOptimizers.Config):
        raise ConfigError("mup(config) was applied to this config already")
    spec = config.model_spec
    model = getattr(spec, "model", None)
    width, layers = getattr(model, "dim", None), getattr(model, "layers", None)
    if not isinstance(width, int) or not isinstance(layers, list):
        raise UnsupportedModelError(
            "mup(config) reads the width and depth from config.model_spec.model.dim and "
            f"len(.layers); got {type(model).__name__}"
        )
    depth = len(layers)
    if getattr(model, "enable_weight_tying", False):
        raise UnsupportedModelError(TIED)
    setup = TitanSetup(rules, tuple(groups), dict(optimizer_names))
    install_init(setup, model, width, depth)
    max_norm = getattr(getattr(config, "training", None), "max_norm", None)
    if isinstance(max_norm, (int, float)) and 0 < max_norm < float("inf"):
        logger.warning(CLIP_NOTE.format(max_norm=max_norm))
    own = _own_optimizer_values(config.optimizer)
    if "betas" in own:
        own["betas"] = tuple(own["betas"])
    config.optimizer = SpectralOptimizers.Config(
        implementation=config.optimizer.implementation,
        optimizer_factory_kwargs_by_name=dict(config.optimizer.optimizer_factory_kwargs_by_name),
        width=width,
        depth=depth,
        setup=setup,
        **own,
    )
    _read_run(config)
    config.__class__ = _run_class(type(config))
    return config


RUN_CLASSES: dict[type, type] = {}
"""A config class -> its subclass whose ``__post_init__`` also reads the run (:func:`_run_class`)."""


def _run_class(cls: type) -> type:
    """``cls`` with a ``__post_init__`` that, after its own, copies the run's steps and
    global batch into the optimizer config (:func:`_read_run`). torchtitan's ConfigManager
    builds the final config as ``type(registry_config)(...)`` once the command line is
    read (tyro), so ``--training.steps`` and ``--training.global-batch-size`` reach the
    container without being passed twice. Same name, fields and slots: only the hook."""
    if cls in RUN_CLASSES.values():
        return cls
    if cls not in RUN_CLASSES:
        own = getattr(cls, "__post_init__", None)

        def __post_init__(self: Any) -> None:
            if own is not None:
                own(self)
            _read_run(self)

        RUN_CLASSES[cls] = type(
            cls.__name__,
            (cls,),
            {
                "__slots__": (),
                "__post_init__": __post_init__,
                "__module__": cls.__module__,
                "__qualname__": cls.__qualname__,
                "__doc__": cls.__doc__,
            },
        )
    return RUN_CLASSES[cls]


def _read_run(config: Any) -> None:
    """The job's ``training.steps`` and ``training.global_batch_size`` (where set: its
    default, -1, is the local batch times the data-parallel degree, which only the Trainer
    knows) into a :class:`SpectralOptimizers.Config`; the generated module's BASE_RUN is the
    base they are compared with (none recorded: nothing moves)."""
    opt = getattr(config, "optimizer", None)
    training = getattr(config, "training", None)
    if not isinstance(opt, SpectralOptimizers.Config) or training is None:
        return
    steps, batch = getattr(training, "steps", 0), getattr(training, "global_batch_size", -1)
    opt.steps = steps if isinstance(steps, int) and steps > 0 else 0
    opt.batch = batch if isinstance(batch, int) and batch > 0 else 0


BATCH_NOTE = (
    "spectral: training.global_batch_size is not set, so the rules take the run's batch "
    "as the base's ({base:g} sequences, BASE_RUN): set --training.global-batch-size for "
    "the rules along the batch"
)
"""The warning when the run's global batch is torchtitan's default (unknown until the Trainer)."""


def registry_function(mup: Callable[[Any], Any], name: str) -> Callable[[], Any]:
    """torchtitan's Llama3 registry function ``name`` with ``mup`` applied, for a
    generated module's ``__getattr__`` (``--module mup_titan --config NAME``)."""
    registry = importlib.import_module(REGISTRY_MODULE)
    base = getattr(registry, name, None)
    ours = getattr(base, "__module__", None) == REGISTRY_MODULE
    if name.startswith("_") or not ours or not callable(base):
        raise AttributeError(name)  # not one of its registry functions

    def config() -> Any:
        return mup(base())

    config.__name__ = config.__qualname__ = name
    config.__doc__ = f"{REGISTRY_MODULE}.{name}() trained by the muP rules."
    return config
