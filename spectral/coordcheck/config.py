"""What one coordinate check runs: :class:`CoordCheckConfig`, its defaults and checks.

The configuration is validated when it is made (every refusal is a one-line
:class:`~spectral.errors.SpecError`), names the optimizers by their catalog names, and
reports itself as the ``"config"`` of the result (:meth:`CoordCheckConfig.to_dict`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..catalog import catalog, resolve
from ..errors import SpecError
from ..measure.common import checked_factory, factory_label
from ..spec import OptimizerSpec, show
from .slopes import PARAMETERIZATIONS, SLOPE_TOLERANCE_COORD

__all__ = ["DEFAULT_ALPHA_BASE", "DEFAULT_LR", "GPT_DEFAULT_LR", "CoordCheckConfig"]

DEFAULT_LR = {
    "sgd": 0.05,
    "adamw": 0.01,
    "lion": 0.001,
    "sophia": 0.01,
    "muon": 0.02,
    "muon-kimi": 0.01,
    "shampoo": 0.02,
    "soap": 0.01,
    "sso": 0.02,
}
"""Base learning rates of the MLP (at the base width and depth) when ``--lr`` is not given."""

GPT_DEFAULT_LR = 0.003
"""Base learning rate of every optimizer on the GPT (and on factory models) when not given: at
0.01 AdamW's update is ~17x the GPT's initial residual stream within 10 steps and the loss
spikes (docs/coord-check)."""

DEFAULT_ALPHA_BASE = {"mlp": 0.5, "gpt": 1.0, "custom": 1.0}
"""Base hidden multiplier when ``--alpha-base`` is not given. With α ∝ 1/L the blocks' random
contribution at init adds ~α_base²·L_base/L to ‖h_L‖², a finite-depth transient that a depth
sweep from a shallow base picks up as a negative slope; for the MLP α_base = 0.5 keeps it
inside the default sweep (docs/coord-check/README.md, *Findings*)."""


@dataclass
class CoordCheckConfig:
    model: str = "mlp"
    """``mlp`` (the paper's residual MLP), ``gpt`` (GPT-2 style), or ``custom`` (set when
    ``model_factory`` is given)."""
    model_factory: Callable[[int, int], Any] | None = None
    """``model_factory(width, depth)`` -> your ``nn.Module`` (token ids ``(B, T)`` -> logits,
    or an object with ``.logits``); checked instead of the reference models."""
    batch_factory: Callable[[int, int], Any] | None = None
    """``batch_factory(batch, seed)`` -> the model's input for models that take other than
    token ids: ``inputs`` or ``(inputs, targets)``, see :func:`user_batch`."""
    model_factory_name: str | None = None
    """How messages and the result name ``model_factory`` (the CLI passes ``MODULE:FUNC`` as
    written); default ``module:qualname``."""
    batch_factory_name: str | None = None
    """The same for ``batch_factory``."""
    vocab_size: int | None = None
    """Vocabulary of the random token batch when the model does not tell (``config.vocab_size``
    or the readout's ``out_features``)."""
    adapter: dict[str, Any] | None = None
    """The fields of an ``Adapter`` for a model no built-in adapter recognises (``spectral
    coord-check --adapter``); passed as ``adapter=`` to every call into the generated module."""
    optimizer: str = "adamw"
    others: str | None = None
    """Optimizer for every parameter but the hidden weights (default adamw for hybrids)."""
    spec: OptimizerSpec | None = None
    """A declaration to check instead of the catalog's ``optimizer`` (its name replaces it)."""
    factory: Callable[..., Any] | None = None
    """``factory(param_groups, **kwargs)`` building ``optimizer``'s implementation; needed
    for a ``spec`` the catalog does not declare."""
    k: int = 2
    relu: bool = True
    parameterizations: tuple[str, ...] = PARAMETERIZATIONS
    widths: tuple[int, ...] = (64, 128, 256, 512)
    depths: tuple[int, ...] = (2, 4, 8, 16)
    fixed_width: int | None = None
    """Width of the depth sweep (default: the base width, the smallest of ``widths``)."""
    fixed_depth: int | None = None
    """Depth of the width sweep (default: the base depth, the smallest of ``depths``)."""
    steps: int = 10
    batch: int = 8
    seeds: int = 3
    lr: float | None = None
    others_lr: float | None = None
    weight_decay: float = 0.0
    alpha_base: float | None = None
    """Base block multiplier ``α_base`` of the hidden blocks (input/output bases are 1)."""
    d_in: int = 32
    d_out: int = 8
    seq_len: int = 32
    device: str = "cpu"
    dtype: str = "float32"
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.spec is not None:
            if not isinstance(self.spec, OptimizerSpec):
                raise SpecError(f"spec must be an OptimizerSpec, got {type(self.spec).__name__}")
            main = self.spec
            if self.factory is None and catalog().get(main.name) != main:
                raise SpecError(
                    f"{main.name!r} is not a catalog declaration, so the generated module has "
                    "no implementation for it; pass a factory fn(param_groups, **kwargs) "
                    "(spectral coord-check --factory MODULE:CALLABLE; e.g. torch.optim:AdamW)"
                )
        else:
            main = resolve(self.optimizer)
        if self.factory is not None and not callable(self.factory):
            raise SpecError(f"factory must be callable, got {type(self.factory).__name__}")
        self.optimizer = main.name
        if self.others is None and not main.applies_to_biases:
            self.others = "adamw"
        if self.others is not None:
            self.others = resolve(self.others).name
            if not resolve(self.others).applies_to_biases:
                raise SpecError(
                    f"--others {self.others} applies to matrices only; the other parameters "
                    "include biases and LayerNorm gains, so pick a vector optimizer (adamw, ...)"
                )
        for p in self.parameterizations:
            if p not in PARAMETERIZATIONS:
                raise SpecError(
                    f"unknown parameterization {p!r}; choose from {', '.join(PARAMETERIZATIONS)}"
                )
        if self.model_factory is not None:
            if not callable(self.model_factory):
                raise SpecError(
                    f"model_factory must be callable, got {type(self.model_factory).__name__}"
                )
            self.model = "custom"
        elif self.model == "custom":
            raise SpecError("model 'custom' needs a model_factory(width, depth)")
        if self.batch_factory is not None:
            if self.model_factory is None:
                raise SpecError("a batch factory needs a model factory (--model-factory)")
            if not callable(self.batch_factory):
                raise SpecError(
                    f"batch_factory must be callable, got {type(self.batch_factory).__name__}"
                )
        if self.adapter is not None and self.model_factory is None:
            raise SpecError("an adapter places a model factory's model (--model-factory)")
        if self.vocab_size is not None and (self.model_factory is None or self.vocab_size < 1):
            raise SpecError("vocab_size sizes a model factory's token batch: a positive integer")
        if self.model not in ("mlp", "gpt", "custom"):
            raise SpecError(f"--model must be mlp or gpt, got {self.model!r}")
        if self.model == "gpt":
            bad = [w for w in self.widths if w % 64]
            if bad:
                raise SpecError(f"GPT widths must be multiples of 64 (head dim), got {bad}")
        if len(self.widths) < 2 or len(self.depths) < 2:
            raise SpecError("need at least two widths and two depths to fit a slope")
        if min(self.widths) < 1 or min(self.depths) < 1 or self.steps < 1 or self.seeds < 1:
            raise SpecError("widths, depths, steps and seeds must be positive")
        if not 1 <= self.k <= 8:
            raise SpecError(f"--k must be from 1 to 8, got {self.k}")
        self.widths = tuple(sorted(set(self.widths)))
        self.depths = tuple(sorted(set(self.depths)))
        if self.fixed_width is None:
            self.fixed_width = self.widths[0]
        if self.fixed_depth is None:
            self.fixed_depth = self.depths[0]

    @property
    def base_width(self) -> int:
        return min(self.widths)

    @property
    def base_depth(self) -> int:
        return min(self.depths)

    @property
    def hidden(self) -> str | OptimizerSpec:
        """What the generated module is rendered for: the declaration, else the name."""
        return self.spec if self.spec is not None else self.optimizer

    def factories(self) -> dict[str, Callable[..., Any]]:
        """``build_optimizers(factories=...)``: the user's factory, checked, if any."""
        if self.factory is None:
            return {}
        return {self.optimizer: checked_factory(self.factory, factory_label(self.factory))}

    @property
    def hybrid(self) -> bool:
        return self.others is not None

    @property
    def alpha(self) -> float:
        """``α_base``: the given one, else :data:`DEFAULT_ALPHA_BASE` of the model."""
        return self.alpha_base if self.alpha_base is not None else DEFAULT_ALPHA_BASE[self.model]

    def factory_name(self, which: str) -> str:
        """``model_factory``'s (``which="model"``) or ``batch_factory``'s name in messages."""
        given = self.model_factory_name if which == "model" else self.batch_factory_name
        fn = self.model_factory if which == "model" else self.batch_factory
        return given or factory_label(fn)

    def _default_lr(self, optimizer: str) -> float:
        return DEFAULT_LR.get(optimizer, 0.01) if self.model == "mlp" else GPT_DEFAULT_LR

    def main_lr(self) -> float:
        return self.lr if self.lr is not None else self._default_lr(self.optimizer)

    def other_lr(self) -> float:
        if self.others_lr is not None:
            return self.others_lr
        return self._default_lr(self.others or self.optimizer)

    def rules_k(self, param: str) -> int:
        if param == "mup-k1":
            return 1
        return max(2, self.k) if self.model == "mlp" else 2

    def to_dict(self) -> dict[str, Any]:
        custom = self.model == "custom"
        return {
            "model": self.model,
            "model_factory": self.factory_name("model") if custom else None,
            "batch_factory": None if self.batch_factory is None else self.factory_name("batch"),
            "vocab_size": self.vocab_size if custom else None,
            "adapter": self.adapter,
            "optimizer": self.optimizer,
            "others": self.others,
            "spec": None
            if self.spec is None
            else {
                "name": self.spec.name,
                "update_norm": show(self.spec.update_norm),
                "applies_to": self.spec.applies_to,
            },
            "factory": None if self.factory is None else factory_label(self.factory),
            "k": self.k if self.model == "mlp" else None,
            "relu": self.relu if self.model == "mlp" else None,
            "parameterizations": list(self.parameterizations),
            "widths": list(self.widths),
            "depths": list(self.depths),
            "fixed_width": self.fixed_width,
            "fixed_depth": self.fixed_depth,
            "base_width": self.base_width,
            "base_depth": self.base_depth,
            "steps": self.steps,
            "batch": self.batch,
            "seeds": self.seeds,
            "lr": self.main_lr(),
            "others_lr": self.other_lr() if self.hybrid else None,
            "weight_decay": self.weight_decay,
            "alpha_base": self.alpha,
            "d_in": self.d_in if self.model == "mlp" else None,
            "d_out": self.d_out if self.model == "mlp" else None,
            "seq_len": self.seq_len
            if self.model == "gpt" or (custom and self.batch_factory is None)
            else None,
            "device": self.device,
            "slope_tolerance": SLOPE_TOLERANCE_COORD,
        }
