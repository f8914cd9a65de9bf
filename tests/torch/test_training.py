"""Real training on CPU with a generated config: eager, torch.compile, DDP (gloo)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pytorch_optimizer")
import torch.nn.functional as F  # noqa: E402
import torch.optim._muon as muon  # noqa: E402
from float32_muon import newton_schulz_float32  # noqa: E402

from spectral.codegen import render  # noqa: E402
from spectral.models import GPT  # noqa: E402

pytestmark = [pytest.mark.generated, pytest.mark.slow]  # generated: also run on the --vendor form

HERE = Path(__file__).resolve().parents[1]  # tests/: the shared helpers and workers
TEXT = (
    b"It is a truth universally acknowledged, that a single man in possession of a good "
    b"fortune, must be in want of a wife. However little known the feelings or views of "
    b"such a man may be on his first entering a neighbourhood, this truth is so well fixed "
    b"in the minds of the surrounding families, that he is considered the rightful property "
    b"of some one or other of their daughters. "
) * 4
DATA = torch.tensor(list(TEXT), dtype=torch.long)
BASE_WIDTH, BASE_DEPTH = 64, 2
LR = {"muon-kimi": 3e-3, "adamw": 3e-3}


def config(tmp_path: Path, hidden: str, others: str | None):
    path = tmp_path / f"cfg_{hidden.replace('-', '_')}_{others}.py"
    path.write_text(render(hidden, others, base_width=BASE_WIDTH, base_depth=BASE_DEPTH))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # as an import does (dataclasses look it up)
    spec.loader.exec_module(mod)
    return mod, path


def batch(gen: torch.Generator, block: int = 32, size: int = 8):
    starts = torch.randint(0, len(DATA) - block - 1, (size,), generator=gen)
    x = torch.stack([DATA[s : s + block] for s in starts])
    y = torch.stack([DATA[s + 1 : s + block + 1] for s in starts])
    return x, y


def train(cfg, width: int, depth: int, steps: int, *, compile: bool = False) -> list[float]:
    torch.manual_seed(0)
    model = GPT(width, depth, block_size=32, multipliers=cfg)
    cfg.init_(model, width, depth, 0.02)
    run = torch.compile(model) if compile else model
    base = {o: LR[o] for o in set(cfg.OPTIMIZERS.values())}
    opts = cfg.build_optimizers(run, width, depth, lr=base, weight_decay=0.0)
    gen = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(steps):
        x, y = batch(gen)
        loss = F.cross_entropy(run(x).flatten(0, 1), y.flatten())
        loss.backward()
        opts.step()
        opts.zero_grad()
        losses.append(loss.item())
    return losses


def float32_muon_above_the_base(monkeypatch, hidden: str, width: int) -> None:
    """Muon's Newton-Schulz in float32 (tests/float32_muon.py) for the Muon-Kimi runs above
    the base width: what they show is that the config trains the GPT, not Muon's bfloat16
    rounding, and torch's bfloat16 iteration was 90% of their time on this CPU (20 steps at
    width 128: 19.6 CPU s against 1.5 s in float32, the same losses to 4 digits: mean of the
    last three 2.7018 against 2.7017). The width-64 run and tests/ddp_worker.py train with
    torch's own iteration, as users do."""
    if hidden.startswith("muon") and width > BASE_WIDTH:
        monkeypatch.setattr(muon, "_zeropower_via_newtonschulz", newton_schulz_float32)


def decreased(losses: list[float]) -> bool:
    head = sum(losses[:3]) / 3
    tail = sum(losses[-3:]) / 3
    return tail < head - 0.3 and all(map(lambda v: v == v, losses))  # noqa: C417


@pytest.mark.parametrize("hidden,others", [("muon-kimi", "adamw"), ("adamw", None)])
@pytest.mark.parametrize("width", [64, 128])
def test_gpt_trains_eager(tmp_path, hidden, others, width, monkeypatch):
    float32_muon_above_the_base(monkeypatch, hidden, width)
    cfg, _ = config(tmp_path, hidden, others)
    losses = train(cfg, width, 2, 20)
    assert decreased(losses), losses


@pytest.mark.skipif(
    shutil.which("gcc") is None and shutil.which("cc") is None, reason="no C compiler"
)
@pytest.mark.parametrize("hidden,others", [("muon-kimi", "adamw"), ("adamw", None)])
# one width: above the base (64), where every multiplier differs from 1; the eager test
# trains both widths, and a second compile of the same graph at another shape (~60 s on
# two cores) asserts nothing more
@pytest.mark.parametrize("width", [128])
def test_gpt_trains_under_torch_compile(tmp_path, hidden, others, width, monkeypatch):
    """The same runs as eager, compiled with inductor (a cold compile takes ~40 s on CPU)."""
    float32_muon_above_the_base(monkeypatch, hidden, width)
    cfg, _ = config(tmp_path, hidden, others)
    compiled = train(cfg, width, 2, 20, compile=True)
    assert decreased(compiled), compiled
    # the same numbers as eager, up to kernel-fusion rounding
    eager = train(cfg, width, 2, 1)
    assert compiled[0] == pytest.approx(eager[0], rel=1e-4)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.distributed
def test_mlp_trains_under_ddp_gloo(tmp_path):
    _, path = config(tmp_path, "muon-kimi", "adamw")
    out = tmp_path / "ddp.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run(
        [sys.executable, str(HERE / "ddp_worker.py"), str(path), str(_free_port()), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["optimizers"] == ["adamw", "muon-kimi"]
    assert result["max_diff"] == 0.0, result
    assert result["checksums"][0] == result["checksums"][1]
    assert len(result["losses"]) == 5
