"""Recipes: where a sweep run's hyperparameters come from.

A recipe is the config module :mod:`spectral.codegen` generates for the sweep's optimizer
(:func:`spectral.codegen.load_generated`), evaluated at the run's size for μP and at the
base size for SP (:class:`GeneratedRecipe`); every record says so (``hp_source: codegen``).
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import SpecError
from .options import PARAMETERIZATIONS, RULES_K, SweepConfig, split_optimizer

__all__ = ["AblatedModule", "GeneratedRecipe", "derived_rules", "generated_module", "recipe"]


def _init_stds(model: Any, role_of: Any, std_of: Any) -> dict[str, float | None]:
    """Per parameter, the std it is drawn with: ``None`` for LayerNorm gains and biases
    (1 and 0), ``0.0`` for other biases (the paper's base bias variance is 0)."""
    from torch import nn

    owners = {id(p): mod for mod in model.modules() for p in mod.parameters(recurse=False)}
    out: dict[str, float | None] = {}
    for name, p in model.named_parameters():
        if isinstance(owners[id(p)], nn.LayerNorm):
            out[name] = None
        else:
            role = role_of(name, p)
            out[name] = 0.0 if role.endswith("_bias") else float(std_of(role))
    return out


class GeneratedRecipe:
    """HPs from the config module :mod:`spectral.codegen` generates (SP: evaluated at the base size).

    ``sp=True`` calls every function of the module at ``(BASE_WIDTH, BASE_DEPTH)``, where
    every ratio is 1: multipliers 1, init std ``init_std`` for every matrix, one lr.
    """

    source = "codegen"

    def __init__(self, module: Any, sp: bool):
        self.module, self.sp = module, sp

    def _size(self, width: int, depth: int) -> tuple[int, int]:
        m = self.module
        return (m.BASE_WIDTH, m.BASE_DEPTH) if self.sp else (width, depth)

    def hparams(self, width: int, depth: int, **base: Any) -> dict[str, Any]:
        return self.module.hparams(*self._size(width, depth), **base)

    def multipliers(self, width: int, depth: int, multiplier: Any = 1.0) -> dict[str, float]:
        return dict(self.module.multipliers(*self._size(width, depth), multiplier))

    def init_stds(self, model: Any, width: int, depth: int, init_std: float | dict[str, float]) -> dict[str, float | None]:
        w, d = self._size(width, depth)
        return _init_stds(
            model, self.module.classify, lambda role: self.module.init_std_of(role, w, d, init_std)
        )

    def init_factors(self, model: Any, width: int, depth: int) -> dict[str, float]:
        """Parameter name -> what ``init_`` with no ``init_std`` multiplies it by."""
        return dict(self.module.init_factors(model, *self._size(width, depth)))

    def init_(self, model: Any, width: int, depth: int, init_std: float | dict[str, float]) -> None:
        # the generated init_ starts biases at 0, the paper's base (App. E.1), and norm gains at 1
        self.module.init_(model, *self._size(width, depth), init_std)

    def build_optimizers(self, model: Any, width: int, depth: int, **base: Any) -> list[Any]:
        from .muon_scale import DECLARATIONS, factory

        used = set(self.module.OPTIMIZERS.values())  # a key it does not train is refused
        kwargs = {k: v for k, v in _OPTIMIZER_KWARGS.items() if k in used}
        factories = {name: factory(name) for name in used if name in DECLARATIONS}  # declared here, built here
        opt = self.module.build_optimizers(
            model, *self._size(width, depth), optimizer_kwargs=kwargs, factories=factories or None, **base
        )
        return [opt]


class AblatedModule:
    """A generated config module with some width exponents replaced (``--ablate``).

    ``overrides``: (role, HP, a) entries; each sets the exponent of ``r_n`` in that role's
    rule for that HP to ``a`` (the exponent of ``r_L`` is kept). Built from the module's own
    ``CONFIG`` (a frozen dataclass) with its ``rules`` replaced, so every function the recipe
    calls — ``hparams``, ``multipliers``, ``init_std_of``, ``init_``, ``build_optimizers`` —
    applies the replaced rules and nothing else changes.
    """

    def __init__(self, module: Any, overrides: tuple[tuple[str, str, float], ...]):
        import dataclasses

        rules = {role: dict(entry) for role, entry in module.CONFIG.rules.items()}
        for role, hp, a in overrides:
            if hp not in rules.get(role, {}):
                raise SpecError(f"--ablate: the rules have no {hp} for {role} "
                                f"(roles and HPs: {_rule_names(rules)})")
            rules[role][hp] = (float(a), rules[role][hp][1])
        self.module, self.overrides = module, overrides
        self.CONFIG = dataclasses.replace(module.CONFIG, rules=rules)
        self.RULES = rules
        self.BASE_WIDTH, self.BASE_DEPTH = module.BASE_WIDTH, module.BASE_DEPTH
        self.OPTIMIZERS = module.OPTIMIZERS
        self.classify = module.classify
        self.hparams = self.CONFIG.hparams
        self.multipliers = self.CONFIG.multipliers
        self.init_std_of = self.CONFIG.init_std_of
        self.init_ = self.CONFIG.init_
        self.init_factors = self.CONFIG.init_factors
        self.build_optimizers = self.CONFIG.build_optimizers


def _rule_names(rules: dict[str, dict[str, Any]]) -> str:
    return "; ".join(f"{role}: {', '.join(entry)}" for role, entry in rules.items())


_OPTIMIZER_KWARGS = {
    "adamw": {"betas": (0.9, 0.95)},
    "muon-kimi": {"momentum": 0.95, "nesterov": True},
    "muon-shape-scaling": {"momentum": 0.95, "nesterov": True},
    "muon-unit-rms": {"momentum": 0.95, "nesterov": True},
}
"""The paper's settings (App. E): AdamW β = (0.9, 0.95); Muon (every scale mode) Nesterov momentum 0.95."""


def generated_module(optimizer: str, k: int, base_width: int, base_depth: int, folder: str | os.PathLike[str]) -> Any:
    """The config module of a sweep optimizer (:func:`spectral.codegen.load_generated`)."""
    from ..codegen.torch import load_generated
    from .muon_scale import engine_optimizer

    hidden, others = split_optimizer(optimizer)
    return load_generated(engine_optimizer(hidden), engine_optimizer(others), k, base_width=base_width, base_depth=base_depth,
                          folder=folder, name=f"config_{optimizer}_k{k}")


def recipe(optimizer: str, parameterization: str, cfg: SweepConfig, folder: str | os.PathLike[str] | None = None) -> GeneratedRecipe:
    """The HP recipe of one (optimizer, parameterisation) pair: the generated config module
    (written to ``folder``, a temporary folder by default); a ``mup`` recipe of a config with
    ``ablation`` applies those exponents instead of the derived ones (:class:`AblatedModule`)."""
    import tempfile

    if parameterization not in PARAMETERIZATIONS:
        raise SpecError(f"parameterization must be one of {', '.join(PARAMETERIZATIONS)}")
    k, sp = RULES_K[parameterization], parameterization == "sp"
    split_optimizer(optimizer)
    if folder is None:
        import atexit
        import shutil

        folder = tempfile.mkdtemp(prefix="spectral-sweep-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)  # nothing left in $TMPDIR
    module = generated_module(optimizer, k, cfg.base_width, cfg.base_depth, folder)
    if cfg.ablation and parameterization == "mup":
        module = AblatedModule(module, cfg.ablation)
    return GeneratedRecipe(module, sp)


def derived_rules(cfg: SweepConfig, folder: str | os.PathLike[str] | None = None) -> dict[str, dict[str, tuple[float, float]]]:
    """Role → HP → (a, b), the exponents of ``r_n`` and ``r_L`` that ``mup`` (k = 2) runs use."""
    rules = recipe(cfg.optimizer, "mup", cfg, folder).module.CONFIG.rules
    return {role: {hp: (float(a), float(b)) for hp, (a, b) in entry.items()} for role, entry in rules.items()}
