"""Family adapters of the generated module, on the models they are written for.

The models and what each must give (:data:`models.CASES`) are in tests/models.py: Hugging
Face models built from config objects, and stand-ins for nanoGPT, torchtitan's Llama and
timm's VisionTransformer.
"""

from __future__ import annotations

import copy
import io
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from models import (  # noqa: E402
    CASES,
    HEAD_DIM,
    VOCAB,
    VisionTransformer,
    hf_gpt2,
    hf_llama,
    logits,
    sample,
)
from spectral.codegen import load_generated  # noqa: E402
from spectral.models import GPT  # noqa: E402

transformers.logging.set_verbosity_error()
pytestmark = [
    pytest.mark.generated,
    pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning"),
]

HERE = Path(__file__).resolve().parents[1]  # tests/: the shared helpers and workers
BASE_WIDTH, BASE_DEPTH = 64, 2


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("adapters")
    return {
        "muon-kimi+adamw": load_generated(
            "muon-kimi", "adamw", base_width=BASE_WIDTH, base_depth=BASE_DEPTH, folder=folder
        ),
        "adamw": load_generated(
            "adamw", base_width=BASE_WIDTH, base_depth=BASE_DEPTH, folder=folder
        ),
    }


def recognising(cfg: Any, names: list[str], types: set[str]) -> list[str]:
    """Every family, in ADAPTERS' order, whose detect pattern matches one of the module
    names (and whose detect_type, if any, one of the class names)."""
    return [
        a.name
        for a in cfg.ADAPTERS
        if any(re.search(a.detect, n) for n in names)
        and (not a.detect_type or any(re.search(a.detect_type, t) for t in types))
    ]


def detected(cfg: Any, model: nn.Module) -> list[str]:
    """Every family that recognises the model; the first is the one the runtime takes."""
    names = [n for n, _ in model.named_modules()]
    return recognising(cfg, names, {type(m).__name__ for m in model.modules()})


# ------------------------------------------------------------------------------------
# every family: roles, detection, hooks, check, head dimension
# ------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", CASES)
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_adapter_places_every_parameter_and_multiplier(key, configs):
    cfg, case = configs["muon-kimi+adamw"], CASES[key]
    width, depth = 128, 3  # not the base size, so every multiplier differs from 1
    torch.manual_seed(0)
    model = case.build(width, depth)
    # the right family comes first; the others that match share its names and come later
    assert detected(cfg, model)[0] == case.adapter
    roles = {n: cfg.classify(n, p, adapter=case.adapter) for n, p in model.named_parameters()}
    assert {n: roles[n] for n in case.roles} == case.roles
    # classify's fallback (every family's patterns) agrees with the family's own
    assert {n: cfg.classify(n, p) for n, p in model.named_parameters()} == roles
    assert cfg.final_module(model) is model.get_submodule(case.final)

    handle = cfg.apply_multipliers(model, width, depth)
    counts = {layer: len(names) for layer, names in handle.modules.items()}
    assert counts == {"input": case.inputs, "hidden": 2 * depth, "output": 1}
    want = cfg.multipliers(width, depth)
    assert want == pytest.approx({"input": 1.0, "hidden": 2 / 3, "output": 0.5})
    assert handle.multipliers == want
    cfg.init_(model, width, depth, 0.02)
    opt = cfg.build_optimizers(model, width, depth, lr=1e-3, weight_decay=0.1)
    # an image model: check cannot build its batch, so it is given one (else one line says so)
    example = sample(case) if case.images else None
    assert cfg.check(model, width, depth, opt, example_input=example) == []
    assert cfg.check(model, width, depth, opt, head_dim=HEAD_DIM, example_input=example) == []
    assert cfg.check(model, width, depth, head_dim=32) == [
        f"head dimension {HEAD_DIM} differs from the base model's 32: the rules assume a "
        "fixed head dimension as the width grows (heads = width / head_dim) or 1/d "
        "attention scaling"
    ]
    # one step moves every trained parameter; the loss is a number
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    logits(model, sample(case)).float().pow(2).mean().backward()
    opt.step()
    unchanged = [n for n, p in model.named_parameters() if torch.equal(p, before[n])]
    assert unchanged == [], unchanged


@pytest.mark.parametrize("key", CASES)
def test_unplaced_parameter_is_named(key, configs):
    cfg, case = configs["adamw"], CASES[key]
    model = case.build(64, 2)
    block = model.get_submodule(case.final)
    block.register_parameter("mystery_scale", nn.Parameter(torch.ones(3)))
    name = f"{case.final}.mystery_scale"
    with pytest.raises(ValueError, match=rf"1 parameter\(s\) match no role pattern: {name} \(3,\)"):
        cfg.apply_multipliers(model, 64, 2)
    [problem] = cfg.check(model, 64, 2)
    assert f"{name} (3,)" in problem


def test_vit_init_dense_patch_embedding_and_tables(configs):
    """patch_embed.proj is a dense input layer: init_std / sqrt(C p p); cls_token and
    pos_embed are tables: init_std itself."""
    cfg = configs["adamw"]
    torch.manual_seed(0)
    model = VisionTransformer(256, 1, img_size=32, patch=4, head_bias=False)
    cfg.init_(model, 256, 1, 0.02)
    assert model.patch_embed.proj.weight.std().item() == pytest.approx(
        0.02 / (3 * 4 * 4) ** 0.5, rel=0.05
    )
    assert model.pos_embed.std().item() == pytest.approx(0.02, rel=0.05)
    assert model.cls_token.std().item() == pytest.approx(0.02, rel=0.25)  # 256 draws
    assert torch.equal(model.patch_embed.proj.bias, torch.zeros(256))
    assert torch.equal(model.norm.weight, torch.ones(256))


def test_vit_head_bias_needs_a_role(configs):
    """timm's default head has a bias, which the vit adapter gives no role (see the
    adapter): the traced structure reads it as the readout's bias, output_bias (issue 38),
    a role this config (no --all-roles) has no rule for, so it is named; patterns= places
    it."""
    cfg = configs["adamw"]
    model = VisionTransformer(64, 2)
    cfg.apply_multipliers(model, 64, 2)
    with pytest.raises(ValueError, match=r"'head\.bias' has role output_bias"):
        cfg.build_optimizers(model, 64, 2, lr=1e-3)
    patterns = {r"(^|\.)head\.bias$": "input_bias"}
    cfg.apply_multipliers(model, 64, 2, patterns=patterns)
    opt = cfg.build_optimizers(model, 64, 2, lr=1e-3, patterns=patterns)
    images = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    assert cfg.check(model, 64, 2, opt, patterns=patterns, example_input=images) == []
    [role] = [g["role"] for g in opt.param_groups if any(p is model.head.bias for p in g["params"])]
    assert role == "input_bias"


def test_hf_gpt2_conv1d_fans(tmp_path):
    """HF GPT-2's Conv1D stores its weight (in, out): SSO's compensation reads the fans
    from the module, so c_fc (64 -> 256) gets lr * sqrt(256 / 64) and c_proj the inverse."""
    cfg = load_generated("sso", "adamw", base_width=BASE_WIDTH, base_depth=1, folder=tmp_path)
    model = hf_gpt2(64, 1)
    assert tuple(model.transformer.h[0].mlp.c_fc.weight.shape) == (64, 256)  # (in, out)
    base = cfg.hparams(64, 1, lr=1.0)["hidden_weight"]["lr"]
    lr_of = {id(p): g["lr"] for g in cfg.param_groups(model, 64, 1, lr=1.0) for p in g["params"]}
    mlp = model.transformer.h[0].mlp
    assert lr_of[id(mlp.c_fc.weight)] == pytest.approx(base * 2)
    assert lr_of[id(mlp.c_proj.weight)] == pytest.approx(base / 2)
    assert lr_of[id(model.transformer.h[0].attn.c_proj.weight)] == pytest.approx(base)


def test_detection_takes_the_right_family_first(configs):
    """A model typical of each family is recognised first by that family: families that
    share another's names (Gemma, Gemma2 and OLMo2 have Llama's) come before it, and none
    recognises a model of a family listed before it."""
    cfg = configs["adamw"]
    llama = ["model.layers.0.self_attn.o_proj", "model.layers.0.mlp.down_proj"]
    post_norms = [
        "model.layers.0.post_attention_layernorm",
        "model.layers.0.post_feedforward_layernorm",
    ]
    typical = {
        "gpt2": (["transformer.h.0.attn.c_proj"], {"GPT2Attention"}),
        "litgpt": (["transformer.h.0.post_attention_norm"], {"Identity"}),
        "gemma2": (
            [*llama, *post_norms, "model.layers.0.pre_feedforward_layernorm"],
            {"Gemma2RMSNorm"},
        ),
        "olmo2": ([*llama, *post_norms], {"Olmo2RMSNorm"}),
        "gemma": (llama, {"GemmaRMSNorm"}),
        "moe": ([*llama, "model.layers.0.mlp.experts"], {"MixtralRMSNorm"}),
        "llama": (llama, {"LlamaRMSNorm"}),
        "falcon": (["transformer.h.0.self_attention.dense"], {"FalconLinear"}),
        "residual-mlp": (["blocks.0.layers.1"], {"Linear"}),
        "neox": (["gpt_neox.layers.0.attention.dense"], {"Linear"}),
        "opt": (["model.decoder.layers.0.self_attn.out_proj"], {"Linear"}),
        "torchtitan": (["layers.0.attention.wo"], {"Linear"}),
        "megatron": (["decoder.layers.0.self_attention.linear_proj"], {"RowParallelLinear"}),
        "vit": (["blocks.0.attn.proj"], {"Linear"}),
        "granite": (llama, {"GraniteRMSNorm"}),
        "bloom": (
            ["transformer.word_embeddings_layernorm", "transformer.h.0.self_attention.dense"],
            {"LayerNorm"},
        ),
        "mamba": (["backbone.layers.0.mixer.out_proj"], {"MambaMixer"}),
        "bert": (["bert.encoder.layer.0.attention.output.dense"], {"Linear"}),
        "modernbert": (["model.layers.0.attn.Wo"], {"Linear"}),
        "hf-vit": (["vit.layers.0.layernorm_before"], {"LayerNorm"}),
        "phi": (["model.layers.0.self_attn.dense"], {"Linear"}),
        "gptj": (["transformer.h.0.attn.out_proj"], {"Linear"}),
    }
    order = [a.name for a in cfg.ADAPTERS]
    assert sorted(typical) == sorted(order)
    for family, (names, types) in typical.items():
        hits = recognising(cfg, names, types)
        assert hits[0] == family
        assert all(order.index(hit) >= order.index(family) for hit in hits)


# ------------------------------------------------------------------------------------
# the "done when": HF Llama and GPT-2 at widths 64 and 256 from base width 64
# ------------------------------------------------------------------------------------

BRANCH_ENDS = {
    "llama": ("model.layers.{}.self_attn.o_proj", "model.layers.{}.mlp.down_proj"),
    "gpt2": ("transformer.h.{}.attn.c_proj", "transformer.h.{}.mlp.c_proj"),
}
BUILD = {"llama": hf_llama, "gpt2": hf_gpt2}


@pytest.mark.parametrize("label", ["muon-kimi+adamw", "adamw"])
@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_multipliers_scale_logits_exactly(family, label, configs):
    cfg = configs[label]
    assert cfg.multipliers(256, 2) == {"input": 1.0, "hidden": 1.0, "output": 0.25}
    assert cfg.multipliers(64, 4) == {"input": 1.0, "hidden": 0.5, "output": 1.0}
    x = torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(1))
    for width in (64, 256):
        for depth in (2, 4):
            torch.manual_seed(0)
            model = BUILD[family](width, depth).eval()
            a = cfg.multipliers(width, depth)
            ends = [p.format(i) for i in range(depth) for p in BRANCH_ENDS[family]]
            # reference: the same weights with every branch end (weight and bias) times
            # alpha_hidden, and the logits times alpha_out
            reference = copy.deepcopy(model)
            with torch.no_grad():
                plain = logits(model, x)
                for name in ends:
                    for p in reference.get_submodule(name).parameters():
                        p.mul_(a["hidden"])
                expected = a["output"] * logits(reference, x)

            missing, *init = cfg.check(model, width, depth)
            assert missing.startswith("block multipliers are not applied")
            # the model's own init, init_ not called: named where init_ would scale it
            scaled = any(f != 1.0 for f in cfg.init_factors(model, width, depth).values())
            assert (init != []) == scaled and scaled == (width != BASE_WIDTH)
            assert all("init_ has not run on this model" in line for line in init)
            assert f"alpha in/hidden/out = 1/{a['hidden']:.6g}/{a['output']:.6g}" in missing
            with pytest.raises(ValueError, match="does not apply the block multipliers"):
                cfg.build_optimizers(model, width, depth, lr=1e-3)

            handle = cfg.apply_multipliers(model, width, depth)
            assert sorted(handle.modules["hidden"]) == sorted(ends)
            with torch.no_grad():
                got = logits(model, x)
            if depth == BASE_DEPTH:  # alpha_hidden = 1: the logits are scaled, exactly
                assert a["output"] == BASE_WIDTH / width
                assert torch.equal(got, plain * a["output"])
            else:
                assert not torch.allclose(got, plain * a["output"])
            torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-7)
            cfg.init_(model, width, depth)
            opt = cfg.build_optimizers(model, width, depth, lr=1e-3, weight_decay=0.1)
            assert cfg.check(model, width, depth, opt) == []


def test_missing_hook_is_named(configs):
    cfg = configs["muon-kimi+adamw"]
    model = hf_llama(128, 4)
    cfg.apply_multipliers(model, 128, 4)
    cfg.init_(model, 128, 4)
    hooks = model.get_submodule("model.layers.3.mlp.down_proj")._forward_hooks
    hooks.clear()
    assert cfg.check(model, 128, 4) == ["alpha_hidden missing on model.layers.3.mlp.down_proj"]


# ------------------------------------------------------------------------------------
# hooks: idempotent, removable, invisible to checkpoints; applied twice is caught
# ------------------------------------------------------------------------------------


def test_hooks_apply_once_remove_and_checkpoint(configs):
    cfg = configs["muon-kimi+adamw"]
    width, depth = 128, 4
    x = torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(1))
    torch.manual_seed(0)
    model = hf_llama(width, depth).eval()
    cfg.init_(model, width, depth)  # the model's own init, scaled: check judges it below
    keys = list(model.state_dict())
    with torch.no_grad():
        plain = logits(model, x)
        first = cfg.apply_multipliers(model, width, depth)
        once = logits(model, x)
        second = cfg.apply_multipliers(model, width, depth)
        twice = logits(model, x)
    assert not torch.allclose(once, plain)
    assert torch.equal(twice, once)  # replaced, not applied on top
    first.remove()  # its hooks were replaced already: removing them changes nothing
    with torch.no_grad():
        assert torch.equal(logits(model, x), once)

    # the hooks hold no state: the checkpoint has the same keys, and loading it into a
    # fresh model with hooks gives the same logits
    assert list(model.state_dict()) == keys
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    torch.manual_seed(1)
    fresh = hf_llama(width, depth).eval()
    cfg.apply_multipliers(fresh, width, depth)
    buffer.seek(0)
    fresh.load_state_dict(torch.load(buffer))
    with torch.no_grad():
        assert torch.equal(logits(fresh, x), once)

    second.remove()
    with torch.no_grad():
        assert torch.equal(logits(model, x), plain)
    [problem] = cfg.check(model, width, depth)
    assert problem.startswith("block multipliers are not applied")


def test_doubled_hook_and_reference_model_are_refused(configs):
    cfg = configs["muon-kimi+adamw"]
    model = hf_llama(128, 4)
    cfg.apply_multipliers(model, 128, 4)
    cfg.init_(model, 128, 4)
    attn = model.get_submodule("model.layers.0.self_attn.o_proj")
    [hook] = attn._forward_hooks.values()
    attn.register_forward_hook(hook)  # the same partial, registered by hand a second time
    assert cfg.check(model, 128, 4) == [
        "block multiplier applied twice on model.layers.0.self_attn.o_proj"
    ]

    reference = GPT(128, 2, head_dim=32, vocab_size=VOCAB, block_size=16, multipliers=cfg)
    with pytest.raises(ValueError, match="applies the block multipliers in its forward pass"):
        cfg.apply_multipliers(reference, 128, 2)


# ------------------------------------------------------------------------------------
# torch.compile and DDP: the hooked HF model trains the same
# ------------------------------------------------------------------------------------

# Two layers compile in half the time of four; a config with base depth 1 keeps every
# multiplier active at width 128, depth 2: alpha_hidden = alpha_out = 1/2.
WIDTH, DEPTH = 128, 2


@pytest.fixture(scope="module")
def shallow(tmp_path_factory):
    """Configs with base width 64 and base depth 1 (the DDP worker loads them by path)."""
    folder = tmp_path_factory.mktemp("shallow")
    return {
        "muon-kimi+adamw": load_generated(
            "muon-kimi", "adamw", base_width=BASE_WIDTH, base_depth=1, folder=folder
        ),
        "adamw": load_generated("adamw", base_width=BASE_WIDTH, base_depth=1, folder=folder),
    }


def _loss(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    out = logits(model, tokens[:, :-1].contiguous())  # the layout check()'s input has
    return F.cross_entropy(out.flatten(0, 1), tokens[:, 1:].flatten())


@pytest.mark.slow
def test_compiled_hf_llama_trains_as_eager(shallow, monkeypatch):
    """The compiled graph runs the hooks: the same logits and gradients as eager, and three
    AdamW steps end where eager's end. The backend is aot_eager: dynamo traces the hooks
    into the graph and AOTAutograd its backward whatever the backend, while inductor's C++
    compile of this model took minutes of a two-core CPU (issue 34's test-time goal).
    (Muon is left out: its Newton-Schulz runs in bfloat16, which turns last-bit
    differences of compiled kernels into visible ones.)"""
    cfg = shallow["adamw"]
    # dynamo imports the hook's module by name: register it as `import` would
    # (load_generated execs the file without adding it to sys.modules)
    monkeypatch.setitem(sys.modules, cfg.__name__, cfg)
    assert cfg.multipliers(WIDTH, DEPTH) == {"input": 1.0, "hidden": 0.5, "output": 0.5}
    gen = torch.Generator().manual_seed(2)
    # 2 rows of 8 tokens, the shape check() runs the model with: the graph dynamo compiled
    # there is the one training reuses (4 x 16 tokens compiled a second graph: a third of the test)
    batches = [torch.randint(0, VOCAB, (2, 9), generator=gen) for _ in range(3)]
    torch.manual_seed(0)
    eager = hf_llama(WIDTH, DEPTH)
    cfg.apply_multipliers(eager, WIDTH, DEPTH)
    cfg.init_(eager, WIDTH, DEPTH, 0.02)
    plain = hf_llama(WIDTH, DEPTH)  # the same weights, no hooks
    plain.load_state_dict(eager.state_dict())
    inner = copy.deepcopy(eager)  # deepcopy keeps the hooks
    compiled = torch.compile(inner, backend="aot_eager")
    assert cfg.check(compiled, WIDTH, DEPTH) == []  # "_orig_mod." names, the same hooks

    _loss(eager, batches[0]).backward()
    _loss(compiled, batches[0]).backward()
    x = batches[0][:, :-1].contiguous()
    got = logits(compiled, x).detach()  # with grad, as check() ran it: no compile for no_grad
    with torch.no_grad():
        want, hookless = logits(eager, x), logits(plain, x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(got, hookless, rtol=0.1)
    for (name, p), q in zip(eager.named_parameters(), inner.parameters(), strict=True):
        assert ((q.grad - p.grad).norm() / p.grad.norm()).item() < 1e-5, name
    eager.zero_grad()
    inner.zero_grad()

    start = {n: p.detach().clone() for n, p in eager.named_parameters()}
    opts = {
        id(m): cfg.build_optimizers(m, WIDTH, DEPTH, lr=3e-3, weight_decay=0.1)
        for m in (eager, compiled)
    }
    losses: dict[int, list[float]] = {id(eager): [], id(compiled): []}
    for tokens in batches:
        for m in (eager, compiled):
            loss = _loss(m, tokens)
            loss.backward()
            opts[id(m)].step()
            opts[id(m)].zero_grad()
            losses[id(m)].append(loss.item())
    assert losses[id(compiled)] == pytest.approx(losses[id(eager)], rel=1e-5)
    # AdamW divides by |g|: inductor's last-bit differences move an entry whose gradient
    # is near zero by a fraction of its step, so compare against how far training moved
    for (name, p), q in zip(eager.named_parameters(), inner.parameters(), strict=True):
        moved = (p - start[name]).norm()
        assert moved > 0, name
        assert ((q - p).norm() / moved).item() < 1e-3, name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("hf_worker", HERE / "hf_worker.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # as an import does (dataclasses look it up)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
@pytest.mark.distributed
def test_hf_llama_under_ddp_matches_one_process(tmp_path, shallow):
    """2 gloo ranks, each with half of every global batch, end where one process ends that
    takes the same global batch as its two halves, each backward on loss / 2 (DDP's average
    of the two half-batch gradients), with the hooked model and Muon + AdamW."""
    cfg = shallow["muon-kimi+adamw"]
    worker = _worker_module()
    out = tmp_path / "ddp.pt"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run(
        [sys.executable, str(HERE / "hf_worker.py"), cfg.__file__, str(_free_port()), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    result = torch.load(out)
    assert result["max_rank_diff"] == 0.0
    assert result["multipliers"] == {"input": 1.0, "hidden": 0.5, "output": 0.5}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the ranks' thread count, so the kernels sum alike
    try:
        single = worker.train(cfg, rank=None)
    finally:
        torch.set_num_threads(threads)
    # bit for bit: the same kernels on the same parts, and a sum of two gradients is
    # the same in either order
    assert result["losses"] == single["losses"]
    assert list(result["params"]) == list(single["params"])
    unequal = [n for n, p in single["params"].items() if not torch.equal(result["params"][n], p)]
    assert unequal == []
