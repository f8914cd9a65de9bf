"""A torchtitan config registry for a CPU run: ``--module tiny_llama --config tiny``.

``tiny()`` is torchtitan's ``Trainer.Config`` for a small Llama3 (torchtitan's own model
configs and init, with its ScaledDotProductAttention module, which backpropagates on CPU;
FlexAttention, the default, has no CPU backward), a stand-in tokenizer and a seeded
random-token dataloader (torchtitan's need downloaded files), passed through ``mup`` of a
generated ``mup_titan.py`` (``spectral codegen ... --framework torchtitan -o
mup_titan.py``) importable from the working directory. TITAN_WIDTH, TITAN_DEPTH and
TITAN_STEPS set the size and the number of steps (defaults 128, 4, 3).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
from torchtitan.components.dataloader import BaseDataLoader
from torchtitan.components.optimizer import default_adamw
from torchtitan.components.tokenizer import BaseTokenizer
from torchtitan.config import TrainingConfig

__all__ = ["BATCH", "SEQ", "VOCAB", "RandomTokens", "ToyTokenizer", "tiny", "tiny_plain"]

WIDTH = int(os.environ.get("TITAN_WIDTH", 128))
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


def model_spec(width: int, depth: int):
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

    return mup_titan.mup(tiny_plain())


def tiny_plain():
    """``tiny`` without ``mup``: torchtitan's own setup of the same model, to compare with
    (benchmarks/gpu_megatron_titan.sh trains both at the base: the same losses)."""
    from torchtitan.components.loss import CrossEntropyLoss
    from torchtitan.trainer import Trainer

    config = Trainer.Config(
        model_spec=model_spec(WIDTH, DEPTH),
        optimizer=default_adamw(lr=8e-4),
        tokenizer=ToyTokenizer.Config(),
        dataloader=RandomTokens.Config(),
        loss=CrossEntropyLoss.Config(),
        training=TrainingConfig(local_batch_size=BATCH, seq_len=SEQ, steps=STEPS),
        activation_checkpoint=None,
    )
    config.lr_scheduler.warmup_steps = 0
    config.training.disable_cuda_graphs = True
    return config
