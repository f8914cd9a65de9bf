"""check(trainer=...): a framework's global gradient clipping against the hook-free form.

In the hook-free form (a config generated with --absorb-multipliers) a carrier's weight is
``W' = s W`` and its gradient is the hooked one divided by ``s``, so the global norm a
framework clips is not the hooked model's: a clip that binds scales the two runs
differently (2 to 4 % apart in loss over 30 steps, issue 36). The config's
``clip_grad_norm_`` clips exactly as the hooked form does. The frameworks clip on their
own when configured to: Hugging Face's Trainer (``TrainingArguments.max_grad_norm``, 1.0 by
default), Lightning's Trainer (``gradient_clip_val``) and torchtitan
(``training.max_norm``, 1.0 by default, always applied). check() cannot see a training
loop, so the user passes the object that configures it, and one line says what to change.
The hooked form needs nothing: its gradients are the hooked ones.
"""

from __future__ import annotations

import math
from typing import Any

from spectral.errors import ConfigTypeError

_EXACT = (
    "clip with the config's clip_grad_norm_(model, width, depth, max_norm) after "
    "backward instead"
)
"""The fix's second half, the same for every framework."""


def _clip_value(value: Any) -> float | None:
    """A clip value as a float: None for none set (None, 0, a negative or NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if value > 0 and not math.isnan(value) else None


def _overrides_clipping(trainer: Any) -> bool:
    """Whether a Lightning Trainer's module clips in its own configure_gradient_clipping
    (where the exact clip goes), so Lightning's gradient_clip_val is only passed to it."""
    module = getattr(trainer, "lightning_module", None)
    own = getattr(type(module), "configure_gradient_clipping", None)
    for base in type(module).__mro__[1:] if module is not None else ():
        if base.__name__ == "LightningModule":
            return own is not getattr(base, "configure_gradient_clipping", None)
    return False


def framework_clip(trainer: Any) -> tuple[str, float | None, str]:
    """(what sets the clip, its value or None when off, how to turn it off) for a Hugging
    Face Trainer or TrainingArguments, a Lightning Trainer, or a torchtitan config (its
    ``training`` section or the section itself); ConfigTypeError for anything else."""
    args = getattr(
        trainer, "args", trainer
    )  # a Hugging Face Trainer holds its arguments
    if hasattr(args, "max_grad_norm"):
        value = _clip_value(args.max_grad_norm)
        return "TrainingArguments.max_grad_norm", value, "max_grad_norm=0"
    if hasattr(trainer, "gradient_clip_val"):
        value = _clip_value(trainer.gradient_clip_val)
        if value is not None and _overrides_clipping(trainer):
            value = None  # the module's configure_gradient_clipping decides
        return "Trainer(gradient_clip_val=...)", value, "gradient_clip_val=None"
    training = getattr(trainer, "training", trainer)
    if hasattr(training, "max_norm") and hasattr(training, "steps"):
        value = _clip_value(training.max_norm)
        value = None if value == math.inf else value
        return "torchtitan's training.max_norm", value, "training.max_norm=inf"
    raise ConfigTypeError(
        "trainer must be a Hugging Face Trainer or TrainingArguments, a Lightning "
        f"Trainer or a torchtitan config, got {type(trainer).__name__}"
    )


def clipping_problems(rules: Any, trainer: Any) -> list[str]:
    """One line when the config is the hook-free form and ``trainer`` clips the global
    gradient norm itself; [] for no trainer, the hooked form, or no clip configured."""
    if trainer is None:
        return []
    what, value, off = framework_clip(trainer)  # a bad argument raises in either form
    if value is None or getattr(rules, "absorbed", None) is None:
        return []
    line = (
        f"{what} is {value:g}: the framework clips the global gradient norm of the "
        "hook-free model, whose carriers hold alpha * W and get the hooked gradients / "
        "alpha, so it clips another norm than the hooked model's and a binding clip "
        f"trains another run; set {off} and {_EXACT}"
    )
    return [line]
