"""``spectral coord-check --model-factory``: coordinate checks on the user's own model.

A test-local Llama-named model (module names as Hugging Face's, so the generated module's
``llama`` adapter places it) keeps most tests free of transformers; one test runs the real
``examples/hf_llama.py``.
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from spectral.cli import main  # noqa: E402
from spectral.errors import SpecError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

TINY = textwrap.dedent(
    '''
    """Llama-named toy models for the coordinate check (embed_tokens, layers.N.self_attn /
    mlp, norm, lm_head), with a fixed head dimension unless the name says otherwise."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    VOCAB = 40


    class Attention(nn.Module):
        def __init__(self, width, head_dim):
            super().__init__()
            self.head_dim = head_dim
            self.heads = width // head_dim
            self.q_proj = nn.Linear(width, width, bias=False)
            self.k_proj = nn.Linear(width, width, bias=False)
            self.v_proj = nn.Linear(width, width, bias=False)
            self.o_proj = nn.Linear(width, width, bias=False)

        def forward(self, x):
            B, T, W = x.shape
            q, k, v = (
                p(x).view(B, T, self.heads, self.head_dim).transpose(1, 2)
                for p in (self.q_proj, self.k_proj, self.v_proj)
            )
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o_proj(y.transpose(1, 2).reshape(B, T, W))


    class MLP(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.up_proj = nn.Linear(width, 2 * width, bias=False)
            self.down_proj = nn.Linear(2 * width, width, bias=False)

        def forward(self, x):
            return self.down_proj(F.relu(self.up_proj(x)))


    class Layer(nn.Module):
        def __init__(self, width, head_dim):
            super().__init__()
            self.input_layernorm = nn.RMSNorm(width)
            self.self_attn = Attention(width, head_dim)
            self.post_attention_layernorm = nn.RMSNorm(width)
            self.mlp = MLP(width)

        def forward(self, h):
            h = h + self.self_attn(self.input_layernorm(h))
            return h + self.mlp(self.post_attention_layernorm(h))


    class Tiny(nn.Module):
        def __init__(self, width, depth, head_dim=8, final_norm=True):
            super().__init__()
            self.embed_tokens = nn.Embedding(VOCAB, width)
            self.layers = nn.ModuleList(Layer(width, head_dim) for _ in range(depth))
            self.norm = nn.RMSNorm(width) if final_norm else None
            self.lm_head = nn.Linear(width, VOCAB, bias=False)

        def forward(self, ids):
            h = self.embed_tokens(ids)
            for layer in self.layers:
                h = layer(h)
            return self.lm_head(h if self.norm is None else self.norm(h))


    def tiny(width, depth):
        return Tiny(width, depth)


    def no_final_norm(width, depth):
        return Tiny(width, depth, final_norm=False)


    def growing_heads(width, depth):  # two heads at every width: head_dim = width / 2
        return Tiny(width, depth, head_dim=width // 2)


    def not_a_model(width, depth):
        return [width, depth]


    def boom(width, depth):
        raise RuntimeError("no model today")


    def unknown_family(width, depth):
        return nn.Sequential(nn.Embedding(VOCAB, width), nn.Linear(width, VOCAB))


    def ids_only(batch, seed):  # no targets: next-token loss on the ids
        gen = torch.Generator().manual_seed(seed)
        return torch.randint(0, VOCAB, (batch, 9), generator=gen)


    def floats(batch, seed):
        return torch.randn(batch, 4)
    '''
)

SMALL = ["--widths", "16,32", "--depths", "1,2", "--steps", "2", "--seeds", "1", "--quiet"]


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "tiny_models.py"
    path.write_text(TINY)
    return path


def _load(path: Path, name: str):
    from spectral.cli.common import load_callable

    return load_callable(f"{path}:{name}", option="--model-factory")


def _one_line_error(capsys, match: str) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert match in err, err
    return err


def _final_norm_input(model, final, inputs):
    """‖input of `final`‖_R on one forward pass, caught independently of the check."""
    seen = []
    hook = final.register_forward_pre_hook(lambda m, args: seen.append(args[0].detach()))
    with torch.no_grad():
        out = model(inputs)
    hook.remove()
    rms = lambda t: float(t.double().pow(2).mean().sqrt())  # noqa: E731
    logits = getattr(out, "logits", out)
    return rms(seen[-1]), rms(logits)


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_factory_model_slopes_and_h_from_the_final_norm(models, tmp_path):
    out = tmp_path / "cc.json"
    factory = f"{models}:tiny"
    assert (
        main(
            [
                "coord-check",
                "--model-factory",
                factory,
                *SMALL,
                "--json",
                str(out),
                "--plots",
                str(tmp_path),
            ]
        )
        == 0
    )
    data = json.loads(out.read_text())
    cfg = data["config"]
    assert cfg["model"] == "custom" and cfg["model_factory"] == factory
    assert cfg["vocab_size"] == 40  # the readout's out_features: the toy has no config
    assert cfg["lr"] == 0.003 and cfg["seq_len"] == 32
    assert data["h_metric"] == "final-norm input" and data["head_dims"] == [8]
    assert "input of norm (the final norm)" in data["h_source"]
    keys = {(s["parameterization"], s["axis"], s["metric"]) for s in data["slopes"]}
    assert keys == {
        (p, a, m)
        for p in ("sp", "mup-k1", "mup")
        for a in ("width", "depth")
        for m in ("h", "delta_h")
    }
    assert all(isinstance(s["slope"], float) for s in data["slopes"])
    assert len(data["points"]) == 3 * 4 * 1 * 3  # params x points x seeds x steps 0..2
    assert (tmp_path / "tiny-adamw-width.png").stat().st_size > 0

    # "h" is the input of the final norm, not the logits: rebuild the first mup point
    from spectral.coordcheck import CoordCheckConfig, build_user, user_batch

    cc = CoordCheckConfig(model_factory=_load(models, "tiny"), widths=(16, 32), depths=(1, 2))
    s = build_user(cc, "mup", 32, 1, seed=0)
    inputs, _, _ = user_batch(cc, 0, s.vocab_size)
    h, logits = _final_norm_input(s.model, s.final, inputs)
    point = next(
        p
        for p in data["points"]
        if (p["parameterization"], p["axis"], p["width"], p["step"]) == ("mup", "width", 32, 0)
    )
    assert point["h"] == pytest.approx(h, rel=1e-6)
    assert point["out"] == pytest.approx(logits, rel=1e-6)
    assert not math.isclose(point["h"], point["out"], rel_tol=1e-2)
    assert point["delta_h"] == 0.0
    last = [p for p in data["points"] if p["step"] == 2]
    assert all(p["delta_h"] > 0 and p["loss"] < math.log(40) + 0.5 for p in last)


def test_factory_sp_holds_the_base_and_mup_the_rules(models):
    """Hooks and groups as the generated module gives them: sp = (BASE_WIDTH, BASE_DEPTH)."""
    from spectral.coordcheck import CoordCheckConfig, build_user, config_module

    cc = CoordCheckConfig(model_factory=_load(models, "tiny"), widths=(16, 64), depths=(1, 4))
    mod = config_module(cc, "mup")

    def hooks(model):
        return {
            (h.layer, h.factor)
            for m in model.modules()
            for h in m._forward_hooks.values()
            if type(h).__name__ == "MultiplierHook"
        }

    def lrs(opt):
        return {g["role"]: g["lr"] for g in opt.param_groups}

    sp = build_user(cc, "sp", 64, 4, seed=0)
    assert hooks(sp.model) == {("input", 1.0), ("hidden", 1.0), ("output", 1.0)}
    assert set(lrs(sp.optimizers[0]).values()) == {0.003}
    mup = build_user(cc, "mup", 64, 4, seed=0)
    assert hooks(mup.model) == {("input", 1.0), ("hidden", 0.25), ("output", 0.25)}
    assert lrs(mup.optimizers[0])["hidden_weight"] == pytest.approx(0.003 / 4)
    assert mod.check(mup.model, 64, 4, mup.optimizers[0]) == []
    # init_: 0.02 at the base; μP's hidden matrices shrink like 1/√r_n
    assert float(sp.model.layers[0].mlp.up_proj.weight.std()) == pytest.approx(0.02, rel=0.05)
    assert float(mup.model.layers[0].mlp.up_proj.weight.std()) == pytest.approx(0.01, rel=0.05)


def test_factory_without_final_norm_measures_the_logits(models, tmp_path, capsys):
    out = tmp_path / "cc.json"
    argv = [
        "coord-check",
        "--model-factory",
        f"{models}:no_final_norm",
        *SMALL,
        "--parameterizations",
        "mup",
        "--json",
        str(out),
    ]
    assert main(argv) == 0
    assert "metric: logits" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["h_metric"] == "logits"
    assert all(p["h"] == p["out"] and p["delta_h"] == p["delta_out"] for p in data["points"])


def test_batch_factory_next_token_loss(models, tmp_path):
    from spectral.coordcheck import CoordCheckConfig, build_user, run_coord_check, user_batch

    cc = CoordCheckConfig(
        model_factory=_load(models, "tiny"),
        batch_factory=_load(models, "ids_only"),
        widths=(16, 32),
        depths=(1, 2),
        steps=1,
        seeds=1,
        parameterizations=("mup",),
        batch=3,
    )
    inputs, targets, shift = user_batch(cc, 0, None)
    assert shift and inputs.shape == (3, 9) and torch.equal(targets, inputs[:, 1:])
    result = run_coord_check(cc)
    assert result["config"]["vocab_size"] is None and result["config"]["seq_len"] is None
    s = build_user(cc, "mup", 16, 1, seed=0)
    with torch.no_grad():
        logits = s.model(inputs)
    want = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 40), targets.reshape(-1))
    first = next(
        p for p in result["points"] if (p["axis"], p["width"], p["step"]) == ("width", 16, 0)
    )
    assert first["loss"] == pytest.approx(float(want), rel=1e-6)
    bad = CoordCheckConfig(
        model_factory=_load(models, "tiny"),
        batch_factory=_load(models, "floats"),
        widths=(16, 32),
        depths=(1, 2),
    )
    with pytest.raises(SpecError, match="returned no targets, so the loss is next-token"):
        user_batch(bad, 0, None)


def test_head_dim_growing_with_width_is_refused(models, capsys):
    argv = ["coord-check", "--model-factory", f"{models}:growing_heads", *SMALL]
    assert main(argv) == 2
    err = _one_line_error(
        capsys, "the head dimension changes with width (width 16: [8], width 32: [16])"
    )
    assert "fixed head dimension (heads = width / head_dim) or 1/d attention scaling" in err


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("{models}", "--model-factory {models}: expected MODULE:CALLABLE"),
        ("no/such/file.py:llama", "--model-factory no/such/file.py:llama: no such file"),
        ("{models}:nope", "has no attribute 'nope'; its callables:"),
        ("{models}:VOCAB", "VOCAB is a int, not a callable"),
        (
            "{models}:not_a_model",
            "model factory {models}:not_a_model(16, 1) returned list, not a torch.nn.Module",
        ),
        ("{models}:boom", "model factory {models}:boom(16, 1) raised RuntimeError: no model today"),
        (
            "{models}:unknown_family",
            "{models}:unknown_family: apply_multipliers: UnsupportedModelError: no residual "
            "stream found: the readout's input is computed from no addition h + f(h)",
        ),
    ],
)
def test_bad_model_factory_is_a_one_line_error(models, capsys, value, match):
    value, match = value.format(models=models), match.format(models=models)
    assert main(["coord-check", "--model-factory", value, *SMALL]) == 2
    _one_line_error(capsys, match)


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--model", "gpt"], "give --model or --model-factory, not both"),
        (
            ["--batch-factory", "{models}:ids_only", "--vocab-size", "9"],
            "a --batch-factory makes its own",
        ),
        (["--batch-factory", "{models}:nope"], "--batch-factory {models}:nope: "),
    ],
)
def test_inconsistent_factory_options(models, capsys, extra, match):
    extra = [e.format(models=models) for e in extra]
    argv = ["coord-check", "--model-factory", f"{models}:tiny", *extra, *SMALL]
    assert main(argv) == 2
    _one_line_error(capsys, match.format(models=models))


def test_batch_factory_needs_a_model_factory(models, capsys):
    assert main(["coord-check", "--batch-factory", f"{models}:ids_only", *SMALL]) == 2
    _one_line_error(capsys, "--batch-factory goes with --model-factory MODULE:FUNC")


@pytest.mark.slow
def test_hf_llama_example(tmp_path):
    """The real Hugging Face Llama from examples/hf_llama.py: h_L at model.norm."""
    pytest.importorskip("transformers")
    out = tmp_path / "llama.json"
    argv = [
        "coord-check",
        "--model-factory",
        f"{ROOT}/examples/hf_llama.py:llama",
        "--widths",
        "32,64",
        "--depths",
        "1,2",
        "--steps",
        "2",
        "--seeds",
        "1",
        "--seq-len",
        "8",
        "--batch",
        "2",
        "--parameterizations",
        "sp,mup",
        "--json",
        str(out),
        "--quiet",
    ]
    assert main(argv) == 0
    data = json.loads(out.read_text())
    assert data["config"]["vocab_size"] == 256  # from model.config.vocab_size
    assert data["h_metric"] == "final-norm input" and data["head_dims"] == [16]
    assert "input of model.norm" in data["h_source"]
    assert {(s["parameterization"], s["axis"], s["metric"]) for s in data["slopes"]} == {
        (p, a, m) for p in ("sp", "mup") for a in ("width", "depth") for m in ("h", "delta_h")
    }
    assert all(math.isfinite(s["slope"]) for s in data["slopes"])
