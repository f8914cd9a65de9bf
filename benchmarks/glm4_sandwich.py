"""GLM-4 (a norm after each branch) as a new user would try it: check() and check(widths=)
against a measurement of h0, the logits and each layer's one-step change across widths.

    .venv/bin/python benchmarks/glm4_sandwich.py

Muon-Kimi + AdamW, widths 64, 128, 256, depth 2, head_dim 16, 2 seeds; about a minute on
this 2-core CPU. The llama family hooks o_proj and down_proj; the trace finds the branch
ends on the post-norms (post_self_attn_layernorm, post_mlp_layernorm), and check() names the
misplaced multiplier.
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path

import torch
import transformers as T

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spectral.codegen import load_generated  # noqa: E402
from spectral.measure.fit import log_slope  # noqa: E402

WIDTHS = [64, 128, 256]
DEPTH, LR, SEEDS = 2, 1e-3, 2


def glm4(width: int) -> torch.nn.Module:
    config = T.Glm4Config(
        vocab_size=128, hidden_size=width, intermediate_size=2 * width,
        num_hidden_layers=DEPTH, num_attention_heads=width // 16,
        num_key_value_heads=width // 16, head_dim=16, use_cache=False,
        tie_word_embeddings=False, pad_token_id=0, eos_token_id=0,
    )
    return T.Glm4ForCausalLM(config)


def rms(t: torch.Tensor) -> float:
    return t.pow(2).mean().sqrt().item()


def measured(cfg, width: int, seed: int) -> dict[str, float]:
    """h0 and the logits at init, the logits' one-step change and what each layer adds to
    the stream, its one-step change."""
    torch.manual_seed(seed)
    model = glm4(width)
    cfg.apply_multipliers(model, width, DEPTH)
    cfg.init_(model, width, DEPTH)
    optimizer = cfg.build_optimizers(model, width, DEPTH, lr=LR)
    torch.manual_seed(100 + seed)
    ids = torch.randint(0, 128, (2, 8))
    before = model(ids, output_hidden_states=True)
    h0 = [h.detach() for h in before.hidden_states]
    model(ids, labels=ids).loss.backward()
    optimizer.step()
    with torch.no_grad():
        after = model(ids, output_hidden_states=True)
    h1 = after.hidden_states
    out = {
        "h0": rms(h0[0]),
        "logits": rms(before.logits.detach()),
        "dlogits": rms(after.logits - before.logits.detach()),
    }
    for layer in range(DEPTH):
        adds = (h1[layer + 1] - h1[layer]) - (h0[layer + 1] - h0[layer])
        out[f"layer {layer} adds, one-step change"] = rms(adds)
    return out


def main() -> None:
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as folder:
        cfg = load_generated("muon-kimi", "adamw", base_width=64, base_depth=DEPTH, folder=folder)
        torch.manual_seed(0)
        model = glm4(64)
        cfg.apply_multipliers(model, 64, DEPTH)
        cfg.init_(model, 64, DEPTH)
        optimizer = cfg.build_optimizers(model, 64, DEPTH, lr=LR)
        found = cfg.check(model, 64, DEPTH, optimizer, lr=LR)
        print(f"check(): {len(found)} line(s)")
        for line in [*found, *found.notes]:
            print(f"  {line}")
        found = cfg.check(
            model, 64, DEPTH, optimizer, lr=LR, widths=WIDTHS, seeds=SEEDS, factory=glm4
        )
        print(f"check(widths={WIDTHS}, seeds={SEEDS}): {len(found)} line(s)")
        values: dict[str, list[float]] = {}
        for width in WIDTHS:
            draws = [measured(cfg, width, seed) for seed in range(SEEDS)]
            for key in draws[0]:
                values.setdefault(key, []).append(sum(d[key] for d in draws) / SEEDS)
        print(f"measured, widths {WIDTHS}, {SEEDS} seeds:")
        for key, v in values.items():
            print(f"  {key:32} n^{log_slope(WIDTHS, v):+.2f}")


if __name__ == "__main__":
    main()
