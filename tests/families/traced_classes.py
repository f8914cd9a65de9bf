"""Tiny builders for issue 38's seven model classes: residual structure found by tracing.

Not a test module: :data:`TRACED_CLASSES` maps a class name to ``(build, batch)`` in the
form of ``CLASSES`` in tests/families/test_model_classes.py. ``build(width, depth)`` gives
the model in eval mode, the real ``transformers`` class built from a tiny config (nothing
downloaded; the ResNet is written here); ``batch()`` gives the forward's keyword input,
with labels where the model takes them (the step is on the model's own loss).

Widths 64, 128 and 256 all build: head_dim 16 (heads = width / 16), intermediate sizes
proportional to the width, depth = the number of layers (of each stack, for the two
encoder-decoders) or of residual blocks. Where a class has a kind of layer only some
layers carry (Jamba's attention and experts), depth 2 already holds each kind.
Output embeddings are untied, as in ``CLASSES`` (T5's config cannot untie: :func:`t5`
does it on the built model; :func:`t5_as_built` is the tied form).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import transformers
from torch import nn

transformers.logging.set_verbosity_error()

T = transformers
VOCAB, HEAD_DIM = 128, 16
SEQ = 32
"""Tokens per sequence of the token batches (and decoder inputs)."""
MELS, FRAMES = 16, 32
"""Whisper's input features: mel bins (the conv frontend's input channels, fixed) and
frames (twice ``max_source_positions``: the encoder refuses any other length)."""
EXPERTS = 4
PIXELS, CLASSES_OUT = 8, 10
"""The ResNet's image side and number of classes."""


def _ready(model: nn.Module) -> nn.Module:
    return model.eval()


def _heads(w: int) -> dict[str, int]:
    return dict(num_attention_heads=w // HEAD_DIM, num_key_value_heads=w // HEAD_DIM)


def t5_as_built(w: int, d: int, scaled: bool = True) -> nn.Module:
    """T5 as transformers 5.24 builds it: one ``shared`` table for the encoder's and the
    decoder's input and the head (T5Config forces tie_word_embeddings=True; the keyword
    only sets ``scale_decoder_outputs``, the head's input times d_model**-0.5)."""
    config = T.T5Config(
        vocab_size=VOCAB,
        d_model=w,
        d_kv=HEAD_DIM,
        d_ff=2 * w,
        num_layers=d,
        num_decoder_layers=d,
        num_heads=w // HEAD_DIM,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=32,
        tie_word_embeddings=scaled,
        decoder_start_token_id=0,
    )
    return _ready(T.T5ForConditionalGeneration(config))


def t5(w: int, d: int) -> nn.Module:
    """Encoder-decoder, ``d`` layers each, relu feed-forward, relative-position buckets in
    the first layer of each stack, the head's input not scaled. Untied as ``CLASSES`` are
    (T5Config cannot untie: see :func:`t5_as_built`): the decoder's input table and the
    head get their own matrices; the encoder keeps ``shared.weight`` (the module
    ``shared`` is never called: ``encoder.embed_tokens`` holds the same tensor)."""
    model = t5_as_built(w, d, scaled=False)
    for module in (model.decoder.embed_tokens, model.lm_head):
        module.weight = nn.Parameter(model.shared.weight.detach().clone())
    return model


def whisper(w: int, d: int) -> nn.Module:
    """Encoder-decoder over log-mel features: two conv1d layers then sinusoidal positions
    (frozen) into the encoder stream; learned positions into the decoder's."""
    config = T.WhisperConfig(
        vocab_size=VOCAB,
        num_mel_bins=MELS,
        d_model=w,
        encoder_layers=d,
        decoder_layers=d,
        encoder_attention_heads=w // HEAD_DIM,
        decoder_attention_heads=w // HEAD_DIM,
        encoder_ffn_dim=2 * w,
        decoder_ffn_dim=2 * w,
        max_source_positions=FRAMES // 2,
        max_target_positions=SEQ,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
        begin_suppress_tokens=None,
        suppress_tokens=None,
        tie_word_embeddings=False,
    )
    return _ready(T.WhisperForConditionalGeneration(config))


def rwkv(w: int, d: int) -> nn.Module:
    """RWKV-4: time-mix (the recurrent attention) and channel-mix blocks; its default
    rescale_every=6 halves the stream in eval mode every six layers (none below depth 6)."""
    config = T.RwkvConfig(
        vocab_size=VOCAB,
        hidden_size=w,
        num_hidden_layers=d,
        attention_hidden_size=w,
        intermediate_size=2 * w,
        context_length=SEQ,
        use_cache=False,
    )
    return _ready(T.RwkvForCausalLM(config))


def jamba(w: int, d: int) -> nn.Module:
    """Mamba and attention layers alternating (attention at odd layers), and a mixture of
    experts in place of the MLP at even layers: layer 0 is mamba + experts, layer 1
    attention + MLP. The mixer's dt rank is fixed at 8 (its default ``"auto"`` is
    ceil(width / 16), which a config rescaled to twice the width does not redo). On CPU the
    mixer runs its torch path (``use_mamba_kernels`` is deprecated in 5.24, no effect)."""
    config = T.JambaConfig(
        vocab_size=VOCAB,
        hidden_size=w,
        num_hidden_layers=d,
        **_heads(w),
        intermediate_size=2 * w,
        num_experts=EXPERTS,
        num_experts_per_tok=2,
        expert_layer_period=2,
        expert_layer_offset=0,
        attn_layer_period=2,
        attn_layer_offset=1,
        mamba_d_state=8,
        mamba_dt_rank=8,
        mamba_d_conv=4,
        mamba_expand=2,
        use_cache=False,
        tie_word_embeddings=False,
    )
    return _ready(T.JambaForCausalLM(config))


def llama4(w: int, d: int) -> nn.Module:
    """Llama 4's text model: every layer a mixture of experts (3-D ``gate_up_proj`` and
    ``down_proj``, a router, a shared expert), attention with qk-norm and, every fourth
    layer, no rope."""
    config = T.Llama4TextConfig(
        vocab_size=VOCAB,
        hidden_size=w,
        num_hidden_layers=d,
        **_heads(w),
        head_dim=HEAD_DIM,
        intermediate_size=2 * w,
        intermediate_size_mlp=2 * w,
        num_local_experts=EXPERTS,
        num_experts_per_tok=1,
        max_position_embeddings=4 * SEQ,
        use_cache=False,
        tie_word_embeddings=False,
        pad_token_id=0,
    )
    return _ready(T.Llama4ForCausalLM(config))


def gpt_oss(w: int, d: int) -> nn.Module:
    """GPT-OSS: attention with learned sinks and biases, sliding and full layers
    alternating, a mixture of experts with expert biases and a router holding plain
    parameters (not an ``nn.Linear``)."""
    config = T.GptOssConfig(
        vocab_size=VOCAB,
        hidden_size=w,
        num_hidden_layers=d,
        **_heads(w),
        head_dim=HEAD_DIM,
        intermediate_size=2 * w,
        num_local_experts=EXPERTS,
        num_experts_per_tok=2,
        sliding_window=SEQ // 2,
        max_position_embeddings=4 * SEQ,
        use_cache=False,
        tie_word_embeddings=False,
    )
    return _ready(T.GptOssForCausalLM(config))


class Block(nn.Module):
    """``x + conv2(relu(conv1(x)))`` at a fixed number of channels."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(torch.relu(self.conv1(x)))


class ResNet(nn.Module):
    """A ResNet-style conv net: conv stem, ``depth`` residual blocks, global average
    pooling, linear head. Width = channels. No normalisation layers."""

    def __init__(self, width: int, depth: int = 2, classes: int = CLASSES_OUT):
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, classes)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        h = self.stem(pixel_values)
        for block in self.blocks:
            h = block(h)
        return self.head(h.mean(dim=(2, 3)))


def resnet(w: int, d: int) -> nn.Module:
    return _ready(ResNet(w, d))


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(1)


def token_batch() -> dict[str, torch.Tensor]:
    ids = torch.randint(0, VOCAB, (8, SEQ), generator=_gen())
    return {"input_ids": ids, "labels": ids}


def _decoder(labels: torch.Tensor, start: int) -> torch.Tensor:
    """The decoder's input: the labels shifted right behind the start token."""
    return torch.cat([torch.full_like(labels[:, :1], start), labels[:, :-1]], dim=1)


def t5_batch() -> dict[str, torch.Tensor]:
    g = _gen()
    ids = torch.randint(0, VOCAB, (8, SEQ), generator=g)
    labels = torch.randint(0, VOCAB, (8, SEQ), generator=g)
    return {"input_ids": ids, "decoder_input_ids": _decoder(labels, 0), "labels": labels}


def whisper_batch() -> dict[str, torch.Tensor]:
    g = _gen()
    features = torch.randn(8, MELS, FRAMES, generator=g)
    labels = torch.randint(3, VOCAB, (8, SEQ), generator=g)
    return {
        "input_features": features,
        "decoder_input_ids": _decoder(labels, 1),
        "labels": labels,
    }


def image_batch() -> dict[str, torch.Tensor]:
    return {"pixel_values": torch.randn(8, 3, PIXELS, PIXELS, generator=_gen())}


TRACED_CLASSES: dict[str, tuple[Callable[[int, int], nn.Module], Callable[[], Any]]] = {
    "t5": (t5, t5_batch),
    "whisper": (whisper, whisper_batch),
    "rwkv": (rwkv, token_batch),
    "jamba": (jamba, token_batch),
    "llama4": (llama4, token_batch),
    "gpt_oss": (gpt_oss, token_batch),
    "resnet": (resnet, image_batch),
}
