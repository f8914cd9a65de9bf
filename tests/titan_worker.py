"""torchtitan's stock Trainer on CPU, built by its own ConfigManager (tests/codegen/test_torchtitan.py).

Run as ``python tests/titan_worker.py OUT.json CLI-ARGS...`` from a folder holding the
generated ``mup_titan.py``; this file is also the config registry the CLI names
(``--module titan_worker --config tiny``): a small Llama3 (torchtitan's own model config
and init, its SDPA attention, which backpropagates on CPU), a stand-in tokenizer and a
random-token dataloader (torchtitan's need downloaded files), passed through the
generated module's ``mup``. Writes every parameter's init std and its optimizer group's
numbers, and the losses of the steps trained.

torchtitan 0.3.0 selects its device when imported (``torchtitan.tools.utils``: CUDA when no
accelerator is found), so torch's device lookup answers "cpu" here before torchtitan is
imported, with a stand-in for the CUDA memory calls its metrics make; one process,
gloo. Nothing of the Trainer is changed.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import types
from dataclasses import dataclass

import torch
import torch._utils


def _cpu_device_module() -> types.ModuleType:
    """torch.cpu with the calls torchtitan's DeviceMemoryMonitor makes on a GPU."""
    mod = types.ModuleType("cpu_device")
    mod.__dict__.update({k: getattr(torch.cpu, k) for k in dir(torch.cpu) if not k.startswith("_")})
    mod.set_device = lambda device: None
    mod.device_count = lambda: 1
    mod.current_device = lambda: 0
    mod.get_device_name = lambda device=None: "cpu"
    mod.get_device_properties = lambda device=None: types.SimpleNamespace(total_memory=1 << 34)
    mod.memory_stats = lambda device=None: {
        "active_bytes.all.peak": 0,
        "reserved_bytes.all.peak": 0,
        "num_alloc_retries": 0,
        "num_ooms": 0,
    }
    mod.reset_peak_memory_stats = lambda device=None: None
    mod.empty_cache = lambda: None
    mod.synchronize = lambda device=None: None
    mod.is_available = lambda: True
    return mod


if not hasattr(torch.distributed, "set_timeout"):  # torch 2.13.0 has only the private one
    from torch.distributed.distributed_c10d import _set_pg_timeout

    torch.distributed.set_timeout = _set_pg_timeout

if not torch.cuda.is_available():  # on a GPU torchtitan finds it itself
    _CPU = _cpu_device_module()
    _device_module = torch._utils._get_device_module
    torch._utils._get_available_device_type = lambda: "cpu"
    torch._utils._get_device_module = lambda t: _CPU if t == "cpu" else _device_module(t)

from torchtitan.components.dataloader import BaseDataLoader  # noqa: E402
from torchtitan.components.optimizer import default_adamw  # noqa: E402
from torchtitan.components.tokenizer import BaseTokenizer  # noqa: E402
from torchtitan.config import TrainingConfig  # noqa: E402

WIDTH = int(os.environ.get("TITAN_WIDTH", 128))  # benchmarks/titan_gpu.sh sets these
DEPTH = int(os.environ.get("TITAN_DEPTH", 4))
STEPS = int(os.environ.get("TITAN_STEPS", 3))
VOCAB, HEAD_DIM, SEQ, BATCH = 256, 16, 32, 4


class ToyTokenizer(BaseTokenizer):
    """A stand-in: the dataloader below draws token ids itself."""

    @dataclass(kw_only=True, slots=True)
    class Config(BaseTokenizer.Config):
        vocab_size: int = VOCAB

    def __init__(self, config: Config, *, tokenizer_path: str) -> None:
        super().__init__()
        self.vocab_size = config.vocab_size

    def encode(self, *args, **kwargs) -> list[int]:
        return []

    def decode(self, *args, **kwargs) -> str:
        return ""

    def get_vocab_size(self) -> int:
        return self.vocab_size


class RandomTokens(BaseDataLoader):
    """Batches of random token ids, seeded: ({"input": x}, y) with y = x shifted by one."""

    @dataclass(kw_only=True, slots=True)
    class Config(BaseDataLoader.Config):
        vocab_size: int = VOCAB

    def __init__(self, config: Config, *, seq_len: int, local_batch_size: int, **_):
        self.config, self.seq_len, self.batch = config, seq_len, local_batch_size
        self.generator = torch.Generator().manual_seed(1)

    def __iter__(self):
        while True:
            tokens = torch.randint(
                0,
                self.config.vocab_size,
                (self.batch, self.seq_len + 1),
                generator=self.generator,
            )
            yield {"input": tokens[:, :-1]}, tokens[:, 1:]

    def state_dict(self):
        return {}

    def load_state_dict(self, state_dict) -> None:
        pass


def _model_spec(width: int, depth: int):
    """torchtitan's Llama3 (its configs, its init), small, with SDPA attention."""
    from torchtitan.models import llama3
    from torchtitan.models.common import (
        ComplexRoPE,
        Embedding,
        Linear,
        RMSNorm,
        compute_ffn_hidden_dim,
    )
    from torchtitan.models.common.attention import ScaledDotProductAttention

    spec = llama3.model_registry("debugmodel")
    model = llama3.Llama3Model.Config(
        dim=width,
        vocab_size=VOCAB,
        tok_embeddings=Embedding.Config(
            num_embeddings=VOCAB, embedding_dim=width, param_init=llama3._EMBEDDING_INIT
        ),
        norm=RMSNorm.Config(normalized_shape=width, param_init=llama3._NORM_INIT),
        lm_head=Linear.Config(
            in_features=width,
            out_features=VOCAB,
            param_init=llama3._output_linear_init(width),
        ),
        layers=llama3._build_llama3_layers(
            n_layers=depth,
            dim=width,
            n_heads=width // HEAD_DIM,
            hidden_dim=compute_ffn_hidden_dim(width, multiple_of=16),
            rope=ComplexRoPE.Config(dim=HEAD_DIM, max_seq_len=SEQ, theta=500000, scaling="llama"),
            attn_backend="flex",
        ),
    )
    for layer in model.layers:
        layer.attention.inner_attention = ScaledDotProductAttention.Config()
    spec.model = model
    return spec


def tiny():
    """The registry function: torchtitan's Trainer.Config, made by the generated mup."""
    import mup_titan
    from torchtitan.components.loss import CrossEntropyLoss
    from torchtitan.trainer import Trainer

    config = Trainer.Config(
        model_spec=_model_spec(WIDTH, DEPTH),
        optimizer=default_adamw(lr=8e-4),
        tokenizer=ToyTokenizer.Config(),
        dataloader=RandomTokens.Config(),
        loss=CrossEntropyLoss.Config(),
        training=TrainingConfig(local_batch_size=BATCH, seq_len=SEQ, steps=STEPS),
        activation_checkpoint=None,
    )
    config.lr_scheduler.warmup_steps = 0
    config.training.disable_cuda_graphs = True
    return mup_titan.mup(config)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    os.environ.update(
        RANK="0",
        LOCAL_RANK="0",
        WORLD_SIZE="1",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(_free_port()),
    )
    from torchtitan.config import ConfigManager

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
    checked = _checked(config, model, trainer.optimizers)
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
        "width": config.optimizer.width,
        "depth": config.optimizer.depth,
        "cli": {
            "lr": config.optimizer.lr,
            "weight_decay": config.optimizer.weight_decay,
            "eps": config.optimizer.eps,
            "betas": list(config.optimizer.betas),
            "max_norm": config.training.max_norm,
            "optimizer_max_norm": config.optimizer.max_norm,
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
