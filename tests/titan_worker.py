"""torchtitan's stock Trainer on CPU, built by its own ConfigManager (tests/codegen/test_torchtitan.py).

Run as ``python tests/titan_worker.py OUT.json CLI-ARGS...`` from a folder holding the
generated ``mup_titan.py``; this file is also the config registry the CLI names
(``--module titan_worker --config tiny``): the shipped example's registry function
(examples/torchtitan_cpu/tiny_llama.py: a small Llama3 through the generated ``mup``) and
its CPU device shim (examples/torchtitan_cpu/cpu_launch.py), so the example is what the
tests run. Writes every parameter's init std and its optimizer group's numbers, and the
losses of the steps trained; nothing of the Trainer is changed (Muon's Newton-Schulz runs
in float32: see main).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "torchtitan_cpu"
sys.path.insert(0, str(EXAMPLE))

from cpu_launch import single_process_env, use_cpu  # noqa: E402

use_cpu()  # before torchtitan is imported (tiny_llama imports it)

from tiny_llama import tiny, tiny_plain  # noqa: E402, F401  (--config tiny / tiny_plain)


def _checked(config, model, container) -> dict[str, list[str]]:
    """check() on the Trainer's model and its optimizer container, before any step, with
    the base values torchtitan's CLI gave; and again with lm_head's group built at twice
    its lr (put back after)."""
    import mup_titan

    opt = config.optimizer
    bias_wd = opt.weight_decay if opt.bias_weight_decay is None else opt.bias_weight_decay
    wd = {"default": opt.weight_decay, "input_bias": bias_wd, "hidden_bias": bias_wd}
    base = {"lr": opt.lr, "weight_decay": wd, "eps": opt.eps}
    size = (opt.width, opt.depth)
    found = list(mup_titan.CONFIG.check(model, *size, container, measure=False, **base))
    head = [
        g
        for part in container.optimizers
        for g in part.param_groups
        if "lm_head.weight" in g["param_names"]
    ]
    keys = ("lr", "initial_lr")  # built wrong: its scheduler's starting lr as well
    for g in head:
        g.update({k: g[k] * 2 for k in keys if k in g})
    wrong = list(mup_titan.CONFIG.check(model, *size, container, measure=False, **base))
    for g in head:
        g.update({k: g[k] / 2 for k in keys if k in g})
    return {"check": found, "check_wrong_group": wrong}


def main(out: str, args: list[str]) -> None:
    single_process_env()
    from torchtitan.config import ConfigManager

    # torch.optim.Muon's Newton-Schulz in float32 (tests/float32_muon.py, beside this file):
    # the groups, the init and that the steps move every parameter are what the tests read,
    # not Muon's bfloat16 rounding, which on this CPU (no bfloat16 matrix units) was most of
    # the three steps' time; torchtitan's own main (test_cpu_example_runs_torchtitans_own_main)
    # steps with torch's own iteration
    from float32_muon import use_float32_newton_schulz

    use_float32_newton_schulz()

    config = ConfigManager().parse_args(args)
    trainer = config.build()  # torchtitan's Trainer, as torchtitan.train builds it
    model = trainer.model_parts[0]
    init = {n: p.detach().float().cpu().clone() for n, p in model.named_parameters()}
    groups = {}
    for opt in trainer.optimizers:
        for group in opt.param_groups:
            for name in group["param_names"]:
                groups[name] = {
                    "optimizer": type(opt).__name__,
                    "lr": group["initial_lr"],
                    "weight_decay": group["weight_decay"],
                    "eps": group.get("eps"),
                    "betas": group.get("betas"),
                    "momentum": group.get("momentum"),
                    "adjust_lr_fn": group.get("adjust_lr_fn"),
                }
    ours = getattr(config.optimizer, "setup", None) is not None  # mup applied (not tiny_plain)
    checked = _checked(config, model, trainer.optimizers) if ours else {}
    losses: list[float] = []
    loss = trainer.loss_fn.fn  # recorded, not changed: the training step's loss values

    def recorded(*a, **k):
        value = loss(*a, **k)
        losses.append(float(value.detach()))
        return value

    trainer.loss_fn.fn = recorded
    trainer.train()
    moved = {
        n: bool(not torch.equal(init[n], p.detach().float().cpu()))
        for n, p in model.named_parameters()
    }
    result = {
        "steps": trainer.step,
        "device": str(trainer.device),
        "width": config.optimizer.width if ours else None,
        "depth": config.optimizer.depth if ours else None,
        "cli": {
            "lr": getattr(config.optimizer, "lr", None),
            "weight_decay": getattr(config.optimizer, "weight_decay", None),
            "eps": getattr(config.optimizer, "eps", None),
            "betas": list(getattr(config.optimizer, "betas", ()) or ()),
            "max_norm": config.training.max_norm,
            "optimizer_max_norm": getattr(config.optimizer, "max_norm", None),
        },
        "hooked_norm": None
        if getattr(trainer.optimizers, "hooked_norm", None) is None
        else float(trainer.optimizers.hooked_norm),
        "init_std": {n: float(t.float().std()) for n, t in init.items()},
        "init_mean_abs": {n: float(t.float().abs().mean()) for n, t in init.items()},
        "groups": groups,
        "moved": moved,
        "losses": losses,
        **checked,
    }
    trainer.close()
    torch.distributed.destroy_process_group()
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
