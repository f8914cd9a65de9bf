"""Mixtures of experts through the generated module: Hugging Face Mixtral, Qwen2-MoE, OLMoE.

The router has the router_weight role (docs/router.md), the fused experts are hidden
matrices that a whole-matrix optimizer (Muon-Kimi) steps one expert matrix at a time
(spectral.torch.optim.experts), the MoE block's output is the branch end alpha_hidden scales.
Tiny models from config objects, CPU, nothing downloaded.
"""

from __future__ import annotations

import copy
import math

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from torch import nn  # noqa: E402
from float32_muon import newton_schulz_float32  # noqa: E402

from spectral.codegen import load_generated  # noqa: E402

transformers.logging.set_verbosity_error()
pytestmark = [
    pytest.mark.generated,
    pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning"),
]

VOCAB, HEAD_DIM, EXPERTS = 128, 16, 4
BASE_WIDTH, BASE_DEPTH = 64, 2
LR = 0.02


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    return load_generated(
        "muon-kimi",
        "adamw",
        base_width=BASE_WIDTH,
        base_depth=BASE_DEPTH,
        folder=tmp_path_factory.mktemp("moe"),
    )


def _common(width: int, depth: int) -> dict:
    heads = width // HEAD_DIM
    return dict(
        vocab_size=VOCAB,
        hidden_size=width,
        num_hidden_layers=depth,
        num_attention_heads=heads,
        num_key_value_heads=heads // 2,
        head_dim=HEAD_DIM,
        max_position_embeddings=64,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )


def mixtral(width: int, depth: int) -> nn.Module:
    config = transformers.MixtralConfig(
        **_common(width, depth),
        intermediate_size=2 * width,
        num_local_experts=EXPERTS,
        num_experts_per_tok=2,
    )
    return transformers.MixtralForCausalLM(config)


def qwen2_moe(width: int, depth: int) -> nn.Module:
    config = transformers.Qwen2MoeConfig(
        **_common(width, depth),
        intermediate_size=2 * width,
        moe_intermediate_size=width,
        shared_expert_intermediate_size=2 * width,
        num_experts=EXPERTS,
        num_experts_per_tok=2,
        mlp_only_layers=[0],  # one dense layer: its mlp is the branch end too
    )
    return transformers.Qwen2MoeForCausalLM(config)


def olmoe(width: int, depth: int) -> nn.Module:
    config = transformers.OlmoeConfig(
        **_common(width, depth),
        intermediate_size=width,
        num_experts=EXPERTS,
        num_experts_per_tok=2,
    )
    return transformers.OlmoeForCausalLM(config)


def batch(seed: int = 0) -> torch.Tensor:
    return torch.randint(0, VOCAB, (4, 16), generator=torch.Generator().manual_seed(seed))


def prepared(cfg, build, width: int, depth: int, seed: int = 0):
    torch.manual_seed(seed)
    model = build(width, depth)
    handle = cfg.apply_multipliers(model, width, depth)
    cfg.init_(model, width, depth)
    opt = cfg.build_optimizers(model, width, depth, lr=LR, weight_decay=0.0)
    return model, handle, opt


def role_of(opt) -> dict[int, tuple[str, str, str | None]]:
    return {
        id(p): (g["role"], g["optimizer"], g.get("expert_layout"))
        for g in opt.param_groups
        for p in g["params"]
    }


@pytest.mark.slow
@pytest.mark.parametrize("depth", [2, 4])
@pytest.mark.parametrize("width", [64, 128])
def test_mixtral_trains_with_muon_kimi_and_checks_clean(cfg, width, depth, monkeypatch):
    if width > BASE_WIDTH:
        # Muon's Newton-Schulz in float32 above the base width: the roles, check() and the
        # loss going down are the subject, not Muon's bfloat16 rounding, and torch's bfloat16
        # iteration was 90% of the width-128 runs' time on this CPU (4 steps at 128 x 4:
        # 17.5-19.9 CPU s against 1.1-2.2 s; losses 4.862 -> 1.615 either way). The width-64
        # runs step with torch's own iteration, as users do.
        import torch.optim._muon as muon

        monkeypatch.setattr(muon, "_zeropower_via_newtonschulz", newton_schulz_float32)
    model, handle, opt = prepared(cfg, mixtral, width, depth)
    # the MoE adapter, not Llama's: the MoE block's output is the branch end
    assert f"model.layers.{depth - 1}.mlp" in handle.modules["hidden"]
    assert len(handle.modules["hidden"]) == 2 * depth
    roles = role_of(opt)
    layer = model.model.layers[0].mlp
    assert roles[id(layer.gate.weight)] == ("router_weight", "muon-kimi", None)
    assert roles[id(layer.experts.gate_up_proj)] == ("hidden_weight", "muon-kimi", "out_in")
    assert roles[id(layer.experts.down_proj)] == ("hidden_weight", "muon-kimi", "out_in")
    assert cfg.check(model, width, depth, opt) == []
    x = batch()
    losses = []
    for _ in range(4):
        loss = model(x, labels=x).loss
        losses.append(float(loss.detach()))
        loss.backward()
        opt.step()
        opt.zero_grad()
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]
    assert cfg.check(model, width, depth, opt, measure=False) == []


def _router_logit_change(cfg, width: int, x: torch.Tensor, patterns=None) -> float:
    """RMS over every layer's router logits of W_r' h - W_r h after one step, at the
    router input h of the first forward pass: the router's own move of its logits."""
    torch.manual_seed(1)
    model = mixtral(width, BASE_DEPTH)
    cfg.apply_multipliers(model, width, BASE_DEPTH, patterns=patterns)
    cfg.init_(model, width, BASE_DEPTH, patterns=patterns)
    opt = cfg.build_optimizers(
        model, width, BASE_DEPTH, lr=LR, weight_decay=0.0, patterns=patterns
    )
    gates = [layer.mlp.gate for layer in model.model.layers]
    inputs: list[torch.Tensor] = []
    hooks = [g.register_forward_hook(lambda m, a, o: inputs.append(a[0])) for g in gates]
    before = [g.weight.detach().clone() for g in gates]
    model(x, labels=x).loss.backward()
    for hook in hooks:
        hook.remove()
    opt.step()
    change = torch.cat(
        [
            h.detach() @ (g.weight.detach() - w).T
            for h, g, w in zip(inputs, gates, before, strict=True)
        ]
    )
    return float(change.double().pow(2).mean().sqrt())


def _slope(widths: list[int], values: list[float]) -> float:
    xs, ys = [math.log(w) for w in widths], [math.log(v) for v in values]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    num = sum((a - mx) * (b - my) for a, b in zip(xs, ys, strict=True))
    return num / sum((a - mx) ** 2 for a in xs)


@pytest.mark.slow  # a width sweep to 512
def test_router_logit_change_after_one_step_is_flat_in_width(cfg, monkeypatch):
    """One Muon-Kimi step moves the router logits by Theta(1) at every width (log-log
    slope within 0.15 over n = 64 ... 512), also when patterns= names the gate
    hidden_weight (its shape places it). (With the hidden rules, what the Llama adapter gave
    the router before, the move grew as sqrt(n): slope >= 0.3, measured before the shape
    reading took routers.)

    The router's own move is measured (its new weights on the same input): the logits'
    total change also holds W_r (h' - h), which vanishes as n^-1/2 in muP because the
    router starts at variance 1/n^2 like the readout (0.156, 0.110, 0.076, 0.055 here)."""
    import torch.optim._muon as muon

    # the slope is the rules'; bfloat16 addmm (torch's Newton-Schulz) was most of the time
    monkeypatch.setattr(muon, "_zeropower_via_newtonschulz", newton_schulz_float32)
    widths = [64, 128, 256, 512]
    x = batch(1)
    changes = [_router_logit_change(cfg, n, x) for n in widths]
    assert abs(_slope(widths, changes)) <= 0.15, changes
    # patterns= naming the gate hidden_weight no longer gives it the hidden rules: a
    # width -> fixed matrix named as a gate is read by its shape as router_weight, and the
    # shape reading wins over patterns= (issue 26's rule), so the move is the same number,
    # bit for bit, at every width (to 256: the reading does not depend on the width, and a
    # second run at 512 was 7 of this test's ~20 CPU seconds here)
    as_hidden = {r"mlp\.gate\.weight$": "hidden_weight"}
    kept = [_router_logit_change(cfg, n, x, as_hidden) for n in widths[:3]]
    assert kept == changes[:3], (kept, changes)


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_each_expert_matrix_is_stepped_as_its_own_matrix(cfg):
    """The composite's Muon-Kimi step on a fused (E, out, in) parameter equals
    torch.optim.Muon run on E separate 2-D matrices with the same group values."""
    width = 128
    model, _, opt = prepared(cfg, mixtral, width, BASE_DEPTH)
    experts = model.model.layers[0].mlp.experts
    group = next(g for g in opt.param_groups if g.get("expert_layout"))
    separate = [nn.Parameter(experts.gate_up_proj.detach()[e].clone()) for e in range(EXPERTS)]
    x = batch()
    model(x, labels=x).loss.backward()
    for e, q in enumerate(separate):
        q.grad = experts.gate_up_proj.grad[e].clone()
    reference = torch.optim.Muon(
        separate,
        lr=group["lr"],
        weight_decay=group["weight_decay"],
        adjust_lr_fn="match_rms_adamw",
    )
    opt.step()
    reference.step()
    for e, q in enumerate(separate):
        torch.testing.assert_close(experts.gate_up_proj.detach()[e], q.detach())
    # a flattened (E * out, in) stack would orthogonalise across experts: not this
    flat = experts.gate_up_proj.detach().reshape(-1, width)
    assert flat.shape[0] == EXPERTS * 4 * width


def test_expert_state_saves_stacked_and_loads(cfg):
    model, _, opt = prepared(cfg, mixtral, 64, BASE_DEPTH)
    x = batch()
    model(x, labels=x).loss.backward()
    opt.step()
    opt.zero_grad()
    saved = copy.deepcopy(opt.state_dict())  # torch's load keeps the saved tensors
    twin, _, twin_opt = prepared(cfg, mixtral, 64, BASE_DEPTH)
    twin.load_state_dict(model.state_dict())
    twin_opt.load_state_dict(saved)
    experts = model.model.layers[0].mlp.experts
    momentum = opt.state[experts.gate_up_proj]["momentum_buffer"]
    assert momentum.shape == experts.gate_up_proj.shape
    for m in (model, twin):
        m(x, labels=x).loss.backward()
    opt.step()
    twin_opt.step()
    for (name, p), q in zip(model.named_parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p, q, msg=name)


def test_transposed_expert_layout_reads_each_matrix_out_by_in(cfg):
    """An (E, in, out) layout (transformers' is_transposed, GPT-OSS) is handed to the
    optimizer as (out, in) matrices: Muon-Kimi on it equals Muon on the transposes."""

    class Experts(nn.Module):
        is_transposed = True

        def __init__(self):
            super().__init__()
            self.down_proj = nn.Parameter(torch.randn(3, 32, 8))  # (E, in=32, out=8)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.experts = Experts()

    model = nn.Module()
    model.block = Block()
    patterns = {r"down_proj$": "hidden_weight"}
    opt = cfg.build_optimizers(
        model, 64, 2, lr=LR, patterns=patterns, multipliers_in_forward=True
    )
    p = model.block.experts.down_proj
    assert opt.param_groups[0]["expert_layout"] == "in_out"
    separate = [nn.Parameter(p.detach()[e].t().clone()) for e in range(3)]
    p.grad = torch.randn_like(p)
    for e, q in enumerate(separate):
        q.grad = p.grad[e].t().clone()
    reference = torch.optim.Muon(
        separate, lr=opt.param_groups[0]["lr"], weight_decay=0.0, adjust_lr_fn="match_rms_adamw"
    )
    opt.step()
    reference.step()
    for e, q in enumerate(separate):
        torch.testing.assert_close(p.detach()[e].t(), q.detach())


@pytest.mark.slow  # measures two more MoE families
@pytest.mark.parametrize("build", [qwen2_moe, olmoe], ids=["qwen2-moe", "olmoe"])
def test_other_moe_families_check_clean(cfg, build):
    for width in (64, 128):
        model, handle, opt = prepared(cfg, build, width, BASE_DEPTH)
        assert cfg.check(model, width, BASE_DEPTH, opt) == []
        roles = role_of(opt)
        mlp = model.model.layers[1].mlp
        assert roles[id(mlp.gate.weight)][0] == "router_weight"
        assert roles[id(mlp.experts.gate_up_proj)] == ("hidden_weight", "muon-kimi", "out_in")
        if build is qwen2_moe:
            assert roles[id(mlp.shared_expert_gate.weight)][0] == "router_weight"
            assert roles[id(mlp.shared_expert.down_proj.weight)][0] == "hidden_weight"
            assert "model.layers.0.mlp" in handle.modules["hidden"]  # the dense layer
        x = batch()
        model(x, labels=x).loss.backward()
        opt.step()
        assert cfg.check(model, width, BASE_DEPTH, opt, measure=False) == []


def test_elementwise_optimizer_steps_fused_experts_whole(tmp_path):
    cfg = load_generated("adamw", base_width=BASE_WIDTH, base_depth=BASE_DEPTH, folder=tmp_path)
    model, _, opt = prepared(cfg, mixtral, 64, BASE_DEPTH)
    groups = [g for g in opt.param_groups if g["role"] == "hidden_weight"]
    assert all("expert_layout" not in g for g in groups)
    assert cfg.check(model, 64, BASE_DEPTH, opt) == []


@pytest.mark.slow  # trains, saves, resumes
def test_checkpoint_state_resumes_sliced_experts(cfg, tmp_path):
    """CheckpointState (torch.distributed.checkpoint, no process group) saves the sliced
    experts' state stacked and a fresh model and optimizer continue bit for bit."""
    dcp = pytest.importorskip("torch.distributed.checkpoint")
    x = batch()

    def steps(model, opt, count):
        for _ in range(count):
            model(x, labels=x).loss.backward()
            opt.step()
            opt.zero_grad()

    ref, _, ref_opt = prepared(cfg, mixtral, 64, BASE_DEPTH)
    steps(ref, ref_opt, 2)
    model, _, opt = prepared(cfg, mixtral, 64, BASE_DEPTH)
    steps(model, opt, 1)
    dcp.save({"train": cfg.CheckpointState(model, opt)}, checkpoint_id=str(tmp_path / "c"))
    fresh, _, fresh_opt = prepared(cfg, mixtral, 64, BASE_DEPTH, seed=3)
    dcp.load({"train": cfg.CheckpointState(fresh, fresh_opt)}, checkpoint_id=str(tmp_path / "c"))
    steps(fresh, fresh_opt, 1)
    for (name, p), q in zip(ref.named_parameters(), fresh.parameters(), strict=True):
        assert torch.equal(p, q), name


@pytest.mark.slow
@pytest.mark.distributed
def test_fsdp2_sharded_experts_take_the_one_process_update(tmp_path):
    """fully_shard'ed Mixtral, 2 gloo processes: Muon-Kimi's fused experts are gathered
    (GatheredOptimizer) and stepped per expert matrix (SlicedOptimizer); three steps equal
    the one-process run (tests/moe_fsdp_worker.py)."""
    import json
    import os
    import socket
    import subprocess
    import sys
    from pathlib import Path

    from spectral.codegen import render

    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not built in")
    config = tmp_path / "moe_fsdp_cfg.py"
    config.write_text(render("muon-kimi", "adamw", base_width=BASE_WIDTH, base_depth=BASE_DEPTH))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "report.json"
    here = Path(__file__).resolve().parents[1]  # tests/: the workers
    r = subprocess.run(
        [sys.executable, str(here / "moe_fsdp_worker.py"), str(port), str(out), str(config)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert r.returncode == 0, r.stderr[-4000:]
    report = json.loads(out.read_text())
    assert report["parts"] == {"adamw": "AdamW", "muon-kimi": "GatheredOptimizer"}
    assert report["inner"] == "SlicedOptimizer"
    assert report["max_diff"] <= 1e-6, report
