"""The two forms of a generated config run the same code: `spectral codegen` (numbers bound
to spectral.torch) and `spectral codegen --vendor` (the runtime's sources copied in) give
identical hparams and bit-identical training steps, on the reference GPT and an HF Llama."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from spectral.codegen import load_generated  # noqa: E402
from spectral.models import GPT  # noqa: E402

transformers.logging.set_verbosity_error()
WIDTH, DEPTH = 128, 4  # from base 64 x 2: every multiplier differs from 1


@pytest.fixture(scope="module")
def forms(tmp_path_factory):
    folder = tmp_path_factory.mktemp("forms")
    kw = dict(base_width=64, base_depth=2, folder=folder)
    return {
        vendor: load_generated("muon-kimi", "adamw", vendor=vendor, **kw)
        for vendor in (False, True)
    }


def test_the_forms_are_what_they_say(forms):
    assert "spectral.torch" in forms[False].Config.__module__
    assert forms[True].Config.__module__ == forms[True].__name__


@pytest.mark.parametrize("width,depth", [(64, 2), (256, 8), (1000, 7)])
def test_identical_hparams(forms, width, depth):
    base = dict(lr=3e-3, init_std=0.02, weight_decay=0.1, eps=1e-7, multiplier=2.0)
    a, b = (forms[v].hparams(width, depth, **base) for v in (False, True))
    assert a == b
    assert forms[False].multipliers(width, depth) == forms[True].multipliers(width, depth)


def _gpt(cfg):
    torch.manual_seed(0)
    model = GPT(WIDTH, DEPTH, vocab_size=128, multipliers=cfg)
    cfg.init_(model, WIDTH, DEPTH)
    return model, cfg.build_optimizers(
        model, WIDTH, DEPTH, lr=1e-2, weight_decay=0.1, multipliers_in_forward=True
    )


def _llama(cfg):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=WIDTH, intermediate_size=2 * WIDTH,
        num_hidden_layers=DEPTH, num_attention_heads=WIDTH // 32,
        num_key_value_heads=WIDTH // 32, head_dim=32, max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    model = transformers.LlamaForCausalLM(config)
    cfg.apply_multipliers(model, WIDTH, DEPTH)
    cfg.init_(model, WIDTH, DEPTH)
    return model, cfg.build_optimizers(model, WIDTH, DEPTH, lr=1e-2, weight_decay=0.1)


def _loss(model, ids):
    out = model(ids)
    logits = out if isinstance(out, torch.Tensor) else out.logits
    return torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())


@pytest.mark.parametrize("build", [_gpt, _llama], ids=["gpt", "hf-llama"])
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_bit_identical_training_steps(forms, build, monkeypatch):
    import torch.optim._muon as muon
    from float32_muon import newton_schulz_float32

    # torch's own Newton-Schulz, in float32: both forms call the same torch.optim.Muon, so
    # the iteration's precision is not what this compares; torch's bfloat16 one was half
    # of this test's time on an AVX2 CPU (cProfile: 13.5 of 26 s for one GPT form, loaded)
    monkeypatch.setattr(muon, "_zeropower_via_newtonschulz", newton_schulz_float32)
    runs = {}
    for vendor, cfg in forms.items():
        model, opt = build(cfg)
        gen = torch.Generator().manual_seed(1)
        losses = []
        for _ in range(3):
            ids = torch.randint(0, 128, (4, 17), generator=gen)
            loss = _loss(model, ids)
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        runs[vendor] = (losses, {n: p.detach().clone() for n, p in model.named_parameters()})
    assert runs[False][0] == runs[True][0]
    for name, p in runs[False][1].items():
        assert torch.equal(p, runs[True][1][name]), name
