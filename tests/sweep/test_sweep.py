"""The learning-rate sweep: data pipeline, resumption, divergence, tables and plots (seconds)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from spectral.sweep.data import BYTE_VOCAB, load_data, split_point, stdlib_bytes, stdlib_files  # noqa: E402
from spectral.errors import SpecError  # noqa: E402
from spectral.sweep import (  # noqa: E402
    RUNS_FILE,
    SweepConfig,
    append_run,
    lr_factor,
    plan,
    read_runs,
    recipe,
    run_sweep,
)
from spectral.sweep.report import (  # noqa: E402
    Table,
    build_tables,
    drift,
    regret_rows,
    render_latex,
    render_markdown,
    render_regret_latex,
    render_regret_markdown,
    transfer_regret,
    write_index,
    write_report,
)

# --------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------


def test_stdlib_files_sorted_and_deterministic():
    files = stdlib_files()
    assert files, "the standard library has .py files"
    assert files == stdlib_files()
    assert all(p.suffix == ".py" for p in files)
    assert not any("site-packages" in p.parts or "dist-packages" in p.parts for p in files)


def test_stdlib_bytes_prefix_property():
    small, big = stdlib_bytes(1000), stdlib_bytes(5000)
    assert len(small) == 1000 and len(big) == 5000
    assert big.startswith(small)


def test_stdlib_corpus_split_is_deterministic_and_byte_level():
    a = load_data("stdlib", n_bytes=20_000, val_fraction=0.1)
    b = load_data("stdlib", n_bytes=20_000, val_fraction=0.1)
    assert a.vocab_size == BYTE_VOCAB == 256
    assert a.train == b.train and a.val == b.val
    assert len(a.train) == 18_000 and len(a.val) == 2_000
    assert a.train + a.val == stdlib_bytes(20_000)
    d = a.description
    assert d["source"] == "stdlib" and d["n_bytes"] == 20_000
    assert d["train_tokens"] == 18_000 and d["val_tokens"] == 2_000
    assert "first 18000 bytes train" in d["split"]
    assert d["sha256"] == b.description["sha256"]


def test_split_point_bounds():
    assert split_point(100, 0.1) == 90
    assert split_point(2, 0.5) == 1
    with pytest.raises(SpecError):
        split_point(100, 1.0)


def test_batches_are_seeded_and_in_vocabulary(tmp_path: Path):
    f = tmp_path / "t.txt"
    f.write_bytes(bytes(range(256)) * 20)
    corpus = load_data(f, n_bytes=None)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    x1, y1 = corpus.train_batch(4, 16, g1)
    x2, y2 = corpus.train_batch(4, 16, g2)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert x1.shape == (4, 16) and int(x1.max()) < 256 and int(x1.min()) >= 0
    assert torch.equal(x1[:, 1:], y1[:, :-1])  # targets are the inputs shifted by one
    v1 = corpus.val_batches(2, 3, 8)
    v2 = corpus.val_batches(2, 3, 8)
    assert all(torch.equal(a[0], b[0]) for a, b in zip(v1, v2, strict=True))


def test_text_file_source(tmp_path: Path):
    f = tmp_path / "mine.txt"
    f.write_bytes(b"hello world\n" * 100)
    c = load_data(str(f), n_bytes=600, val_fraction=0.25)
    assert c.description["source"] == "file" and c.description["n_bytes"] == 600
    assert len(c.train) == 450 and len(c.val) == 150
    with pytest.raises(SpecError, match="vocab 256"):
        load_data(str(f), vocab_size=50304)


def test_token_shards(tmp_path: Path):
    (tmp_path / "train.bin").write_bytes(np.arange(1000, dtype=np.uint16).tobytes())
    (tmp_path / "val.bin").write_bytes(np.arange(200, dtype=np.uint16).tobytes())
    c = load_data(tmp_path, vocab_size=1024)
    assert c.vocab_size == 1024 and len(c.train) == 1000 and len(c.val) == 200
    x, y = c.train_batch(2, 8, torch.Generator().manual_seed(0))
    assert torch.equal(y, x + 1)  # consecutive token ids
    with pytest.raises(SpecError, match="--vocab-size"):
        load_data(tmp_path)
    with pytest.raises(SpecError, match="not below"):
        load_data(tmp_path, vocab_size=500)
    other = tmp_path / "shards"
    other.mkdir()
    for i in range(2):
        (other / f"part{i}.bin").write_bytes(np.full(100, i, dtype=np.uint16).tobytes())
    c = load_data(other, vocab_size=2, val_fraction=0.5)
    assert list(np.unique(np.asarray(c.train))) == [0] and list(np.unique(np.asarray(c.val))) == [1]


@pytest.mark.parametrize("contents", [{}, {"notes.txt": b"x"}, {"sub.bin": None}])
def test_folder_without_shards_says_so_before_asking_for_a_vocabulary(contents, tmp_path: Path):
    """A folder that holds no .bin shard (empty, other files, a folder named *.bin) was
    told "holds token shards: pass --vocab-size"; with or without --vocab-size it is named."""
    for name, data in contents.items():
        (tmp_path / name).mkdir() if data is None else (tmp_path / name).write_bytes(data)
    for vocab in (None, 1024):
        with pytest.raises(SpecError, match=r"^no \.bin token shards in "):
            load_data(tmp_path, vocab_size=vocab)


def test_missing_source():
    with pytest.raises(SpecError, match="neither"):
        load_data("/nonexistent/corpus.txt")


# --------------------------------------------------------------------------------------
# schedule, plan
# --------------------------------------------------------------------------------------


def test_lr_schedule_warmup_then_cosine():
    f = [lr_factor(s, 100, 10, 0.1) for s in range(100)]
    assert f[0] == pytest.approx(0.1) and f[9] == pytest.approx(1.0)
    assert f[10] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(f[10:], f[11:], strict=False))
    assert f[-1] == pytest.approx(0.1, abs=1e-3)


def test_plan_covers_both_axes_once():
    cfg = SweepConfig(widths=(32, 64), depths=(2, 4), width=32, depth=2, log2_lrs=(-8, -7))
    jobs = plan(cfg)
    sizes = {(j.width, j.depth) for j in jobs}
    assert sizes == {(32, 2), (64, 2), (32, 4)}
    assert len(jobs) == len(set(jobs)) == 3 * 3 * 2


# --------------------------------------------------------------------------------------
# toy sweeps
# --------------------------------------------------------------------------------------


def _toy(**kw) -> SweepConfig:
    base = dict(
        optimizer="adamw",
        parameterizations=("sp",),
        widths=(32,),
        depth=1,
        depths=(1,),
        width=32,
        base_width=32,
        base_depth=1,
        log2_lrs=(-8, -6),
        steps=3,
        batch_size=2,
        block_size=8,
        head_dim=32,
        eval_batches=1,
        threads=1,
    )
    base.update(kw)
    return SweepConfig(**base)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    f = tmp_path_factory.mktemp("data") / "text.txt"
    f.write_bytes(stdlib_bytes(4000))
    return load_data(f, n_bytes=None)


def test_resume_skips_finished_runs(tmp_path: Path, corpus, monkeypatch):
    cfg = _toy()
    out = tmp_path / "sw"
    first = run_sweep(cfg, out, corpus)
    assert len(first) == 2 and all(r["val_loss"] is not None for r in first)
    lines = (out / RUNS_FILE).read_text().splitlines()
    assert len(lines) == 2

    # a rerun trains nothing
    import spectral.sweep.train as sweep_train

    def boom(*a, **k):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(sweep_train, "train_run", boom)
    again = run_sweep(cfg, out, corpus)
    assert [r["key"] for r in again] == [r["key"] for r in first]
    assert len((out / RUNS_FILE).read_text().splitlines()) == 2

    # an interrupted sweep (last run lost, torn line left behind) trains exactly the missing run
    monkeypatch.undo()
    (out / RUNS_FILE).write_text(lines[0] + "\n" + lines[1][:25])
    assert len(read_runs(out / RUNS_FILE)) == 1
    calls = []
    real = sweep_train.train_run

    def counting(*a, **k):
        calls.append(a[0])
        return real(*a, **k)

    monkeypatch.setattr(sweep_train, "train_run", counting)
    resumed = run_sweep(cfg, out, corpus)
    assert len(calls) == 1 and calls[0].log2_lr == -6
    assert len(read_runs(out / RUNS_FILE)) == 2
    # same seeds, same data: the rerun reproduces the lost result
    assert resumed[1]["val_loss"] == pytest.approx(first[1]["val_loss"], rel=1e-5)


def test_changed_settings_are_new_runs(tmp_path: Path, corpus):
    out = tmp_path / "sw"
    run_sweep(_toy(log2_lrs=(-8,)), out, corpus)
    run_sweep(_toy(log2_lrs=(-8,), steps=4), out, corpus)
    recs = read_runs(out / RUNS_FILE)
    assert len(recs) == 2 and recs[0]["key"] != recs[1]["key"]


def test_identical_hps_are_reused_across_parameterizations(tmp_path: Path, corpus):
    # at the base size every ratio is 1: sp, mup-k1 and mup are the same run
    cfg = _toy(parameterizations=("sp", "mup-k1", "mup"), log2_lrs=(-8,))
    recs = run_sweep(cfg, tmp_path, corpus)
    assert [r["parameterization"] for r in recs] == ["sp", "mup-k1", "mup"]
    assert sum("reused_from" in r for r in recs) == 2
    assert len({r["val_loss"] for r in recs}) == 1


def test_diverged_run_is_recorded_not_raised(tmp_path: Path, corpus):
    cfg = _toy(log2_lrs=(-8,), init_std=1e30)  # overflowing weights: inf/NaN loss at once
    (rec,) = run_sweep(cfg, tmp_path, corpus)
    assert rec["diverged"] is True and rec["val_loss"] is None and rec["diverged_at"] == 0
    (line,) = (tmp_path / RUNS_FILE).read_text().splitlines()
    assert json.loads(line)["diverged"] is True
    tables = build_tables(read_runs(tmp_path / RUNS_FILE), cfg)
    assert tables[0].values == [["div"]] and tables[0].argmins() == [None]


def test_hybrid_builds_muon_and_adamw(tmp_path: Path, corpus):
    cfg = _toy(optimizer="muon-kimi+adamw", log2_lrs=(-6,), parameterizations=("mup",))
    (rec,) = run_sweep(cfg, tmp_path, corpus)
    assert rec["val_loss"] is not None
    from spectral.sweep import build_run

    r = recipe(cfg.optimizer, "mup", cfg)
    _, opts = build_run(plan(cfg)[0], cfg, r, 256, "cpu")
    assert sorted(type(o).__name__ for o in opts[0].parts.values()) == ["AdamW", "Muon"]


def test_append_run_repairs_torn_line(tmp_path: Path):
    p = tmp_path / RUNS_FILE
    p.write_text('{"key": "a", "fingerprint": "fa"}\n{"key": "b", "tor')
    append_run(p, {"key": "c", "fingerprint": "fc"})
    assert [r["key"] for r in read_runs(p)] == ["a", "c"]


# --------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------


def test_drift_counts_grid_steps():
    t = Table("adamw", "width", "sp", [32, 64, 128], [-9, -8, -7],
              [[3.0, 2.5, 2.0], [3.0, 2.0, 2.5], [2.0, "div", None]])
    assert t.argmins() == [2, 1, 0]
    d = drift(t)
    assert d["end"] == -2 and d["spread"] == 2 and d["argmin_log2_lr"] == [-7, -8, -9]
    flat = Table("adamw", "depth", "mup", [2, 4], [-8, -7], [[2.0, 3.0], [2.1, 3.0]])
    assert drift(flat)["end"] == 0 and drift(flat)["spread"] == 0


def _synthetic_runs(cfg: SweepConfig, losses: dict[tuple[str, int, int], list]) -> list[dict]:
    """runs.jsonl records for ``losses[(param, width, depth)]`` = one loss (or "div") per log2 LR."""
    out = []
    for (p, w, d), row in losses.items():
        for e, v in zip(sorted(cfg.log2_lrs), row, strict=True):
            out.append({"optimizer": cfg.optimizer, "settings": cfg.settings(), "parameterization": p,
                        "width": w, "depth": d, "log2_lr": e,
                        "val_loss": None if v == "div" else v, "diverged": v == "div"})
    return out


def test_transfer_regret_on_synthetic_runs():
    # base n = 64 (the middle row), so the base-optimal LR is not the smallest size's
    cfg = SweepConfig(optimizer="adamw", parameterizations=("sp", "mup"), widths=(32, 64, 128), depth=2,
                      depths=(2, 4), width=32, base_width=64, base_depth=2, log2_lrs=(-9, -8, -7))
    runs = _synthetic_runs(cfg, {
        ("sp", 32, 2): [3.0, 2.8, 2.5],     # best at -7
        ("sp", 64, 2): [2.9, 2.4, 2.6],     # base: best at -8
        ("sp", 128, 2): [2.1, 2.3, 2.9],    # best at -9: regret 2.3 - 2.1
        ("mup", 32, 2): [3.0, 2.8, 2.5],
        ("mup", 64, 2): [2.9, 2.4, 2.6],
        ("mup", 128, 2): [2.5, 2.2, 2.3],   # transfers: regret 0
        ("sp", 32, 4): [3.0, 2.7, 2.9],     # depth: base L = 2 is the (32, 2) row, best at -7
        ("mup", 32, 4): [2.6, 2.65, 2.7],
    })
    # a rerun that diverged at -7 replaces the first (32, 4) SP record (last record wins);
    # the μP (32, 4) run at -7 is not run at all
    runs += _synthetic_runs(cfg, {("sp", 32, 4): [3.0, 2.7, "div"]})
    runs = [r_ for r_ in runs if (r_["parameterization"], r_["depth"], r_["log2_lr"]) != ("mup", 4, -7)]
    tables = {(t.axis, t.parameterization): t for t in build_tables(runs, cfg)}

    r = transfer_regret(tables["width", "sp"])
    assert r["base_size"] == 64 and r["base_log2_lr"] == -8
    assert r["best_loss"] == [2.5, 2.4, 2.1]
    assert r["loss_at_base_lr"] == [2.8, 2.4, 2.3]
    assert r["regret"] == pytest.approx([0.3, 0.0, 0.2])
    assert transfer_regret(tables["width", "mup"])["regret"] == pytest.approx([0.3, 0.0, 0.0])

    d = transfer_regret(tables["depth", "sp"])  # transferred LR -7 diverges at L = 4
    assert d["base_size"] == 2 and d["base_log2_lr"] == -7
    assert d["best_loss"] == [2.5, 2.7] and d["regret"] == [0.0, "div"]
    m = transfer_regret(tables["depth", "mup"])  # the transferred LR was not run at L = 4
    assert m["regret"] == [0.0, None] and m["loss_at_base_lr"] == [2.5, None]
    assert m["best_loss"] == [2.5, 2.6]

    # no base row in the table: the smallest size stands in; a size with no finite run has no regret
    t = Table("adamw", "width", "sp", [128, 256], [-9, -8], [[2.0, 2.5], ["div", "div"]], base_size=64)
    assert transfer_regret(t) == {"sizes": [128, 256], "base_size": 128, "base_log2_lr": -9,
                                  "best_loss": [2.0, None], "loss_at_base_lr": [2.0, "div"], "regret": [0.0, None]}

    params, rows = regret_rows(list(tables.values()))
    assert params == ["sp", "mup"]
    assert [(r_["axis"], r_["size"], r_["base"]) for r_ in rows] == [
        ("width", 32, False), ("width", 64, True), ("width", 128, False), ("depth", 2, True), ("depth", 4, False)]
    assert rows[2]["cells"] == [{"best": "2.100", "regret": "0.200"}, {"best": "2.200", "regret": "0.000"}]
    md = render_regret_markdown(list(tables.values()))
    assert "| width | n = 64 (base) | 2.400 | 0.000 | 2.400 | 0.000 |" in md
    assert "| depth | L = 4 | 2.700 | div | 2.600 | – |" in md
    assert "width (n = 64): sp -8, mup -8" in md
    tex = render_regret_latex(list(tables.values()))
    assert r"width & $n=128$ & 2.100 & 0.200 & 2.200 & 0.000 \\" in tex
    assert r"\multicolumn{2}{c}{SP}" in tex and r"\label{tab:sweep-adamw-regret}" in tex


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_report_on_two_run_toy_sweep(tmp_path: Path, corpus):
    cfg = _toy()
    run_sweep(cfg, tmp_path, corpus, command="spectral sweep --toy")
    paths = write_report(tmp_path, cfg)
    names = {p.name for p in paths}
    assert {"summary.md", "tables.tex", "drift.json", "lr_width.png", "lr_depth.png"} <= names
    for png in ("lr_width.png", "lr_depth.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (tmp_path / "summary.md").read_text()
    assert md.count("**") >= 2 and "spectral sweep --toy" in md
    assert "| 32 |" in md and "| -8 | -6 |" in md
    tex = (tmp_path / "tables.tex").read_text()
    assert r"\textbf{" in tex and r"\begin{tabular}" in tex and r"\toprule" in tex
    drifts = json.loads((tmp_path / "drift.json").read_text())
    assert {d["axis"] for d in drifts} == {"width", "depth"}
    # one size per axis: it is the base, so its regret is 0 and its best loss the row's minimum
    assert all(d["regret"] == [0.0] and d["base_log2_lr"] in (-8, -6) for d in drifts)
    assert md.index("## Transfer regret and best loss") < md.index("## Optimum drift")
    assert "| width | n = 32 (base) |" in md and r"axis & size & best & regret \\" in tex

    tables = build_tables(read_runs(tmp_path / RUNS_FILE), cfg)
    best = tables[0].argmins()[0]
    cells = render_markdown(tables[0]).splitlines()[-1].split("|")[2:-1]
    assert cells[best].strip().startswith("**")
    assert render_latex(tables[0]).count(r"& \textbf{") == 1


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_index_lists_each_optimizer(tmp_path: Path, corpus):
    cfg = _toy(log2_lrs=(-8,))
    run_sweep(cfg, tmp_path / "adamw", corpus, command="spectral sweep --toy")
    write_report(tmp_path / "adamw", cfg)
    text = write_index(tmp_path, [cfg]).read_text()
    assert "[adamw](adamw/summary.md)" in text and "adamw/lr_width.png" in text
    assert "`spectral sweep --toy`" in text
    best = json.loads((tmp_path / "adamw" / "drift.json").read_text())[0]["best_loss"][-1]
    assert f"| [adamw](adamw/summary.md) | width | n = 32 | {best:.3f} / 0.000 | not run | not run |" in text
    # a drift.json from before regret was reported still indexes, with – for the missing numbers
    old = [{k: v for k, v in d.items() if k not in ("best_loss", "regret")}
           for d in json.loads((tmp_path / "adamw" / "drift.json").read_text())]
    (tmp_path / "adamw" / "drift.json").write_text(json.dumps(old))
    assert "| width | n = 32 | – / – | not run | not run |" in write_index(tmp_path, [cfg]).read_text()


# --------------------------------------------------------------------------------------
# command line: --out is required, made when missing, refused when not a folder
# (run_sweep, load_data and write_report are stubbed: no test here trains)
# --------------------------------------------------------------------------------------


@pytest.fixture
def no_training(monkeypatch):
    """Record what the CLI would train and report, instead of doing it."""
    import spectral.sweep.data
    import spectral.sweep.report
    import spectral.sweep.train

    calls: dict[str, list] = {"load_data": [], "run_sweep": [], "write_report": []}

    def load_data(*args, **kwargs):
        calls["load_data"].append(args)
        return "corpus"

    def run_sweep(cfg, out, corpus, **kwargs):
        calls["run_sweep"].append((cfg.optimizer, Path(out), corpus))
        return []

    def write_report(out, cfg, records=None, **kwargs):
        calls["write_report"].append(Path(out))
        return []

    monkeypatch.setattr(spectral.sweep.data, "load_data", load_data)
    monkeypatch.setattr(spectral.sweep.train, "run_sweep", run_sweep)
    monkeypatch.setattr(spectral.sweep.report, "write_report", write_report)
    return calls


def _cli(*words: str) -> int:
    from spectral.cli import main

    return main(["sweep", "--device", "cpu", "--no-progress", *words])


def test_sweep_without_out_is_a_usage_error(capsys, no_training):
    from spectral.cli import main

    assert main(["sweep"]) == 2
    err = capsys.readouterr().err
    assert "the following arguments are required: --out/-o" in err
    assert no_training == {"load_data": [], "run_sweep": [], "write_report": []}


def test_module_main_without_out_is_a_usage_error(capsys):
    from spectral.cli import sweep  # python -m spectral.sweep runs this main

    with pytest.raises(SystemExit) as info:
        sweep.main([])
    assert info.value.code == 2
    assert "--out/-o" in capsys.readouterr().err


def test_out_is_created_with_parents(tmp_path: Path, no_training):
    out = tmp_path / "a" / "b" / "runs"
    assert _cli("--out", str(out), "-O", "adamw", "-O", "muon-kimi+adamw") == 0
    assert (out / "adamw").is_dir() and (out / "muon-kimi+adamw").is_dir()
    assert no_training["run_sweep"] == [
        ("adamw", out / "adamw", "corpus"),
        ("muon-kimi+adamw", out / "muon-kimi+adamw", "corpus"),
    ]
    assert no_training["write_report"] == [out / "adamw", out / "muon-kimi+adamw"]
    assert len(no_training["load_data"]) == 1


def test_existing_out_is_used(tmp_path: Path, no_training):
    (tmp_path / "adamw").mkdir()
    (tmp_path / "adamw" / "keep.txt").write_text("x")
    assert _cli("--out", str(tmp_path)) == 0
    assert (tmp_path / "adamw" / "keep.txt").read_text() == "x"
    assert no_training["run_sweep"] == [("adamw", tmp_path / "adamw", "corpus")]


def test_out_that_is_a_file_is_refused(tmp_path: Path, capsys, no_training):
    path = tmp_path / "out.txt"
    path.write_text("not a folder")
    assert _cli("--out", str(path)) == 2
    assert capsys.readouterr().err == f"error: --out: {str(path)!r} exists and is not a directory\n"
    assert path.read_text() == "not a folder"
    assert no_training == {"load_data": [], "run_sweep": [], "write_report": []}


def test_optimizer_folder_that_is_a_file_is_refused(tmp_path: Path, capsys, no_training):
    (tmp_path / "adamw").write_text("")
    assert _cli("--out", str(tmp_path), "-O", "adamw") == 2
    err = capsys.readouterr().err
    assert err == f"error: --out: {str(tmp_path / 'adamw')!r} exists and is not a directory\n"
    assert no_training["run_sweep"] == []


def test_out_under_a_file_is_one_line(tmp_path: Path, capsys, no_training):
    (tmp_path / "f").write_text("")
    assert _cli("--out", str(tmp_path / "f" / "sub")) == 2
    err = capsys.readouterr().err
    # refused before the corpus is read (spectral.io.check_output_folder), naming the file in the way
    assert err == f"error: --out {tmp_path / 'f' / 'sub'}: cannot create it ({tmp_path / 'f'} is not a folder)\n"
    assert err.count("\n") == 1 and "Traceback" not in err
    assert no_training["run_sweep"] == []


def test_bad_data_leaves_no_folder(tmp_path: Path, capsys, monkeypatch):
    import spectral.sweep.train

    def fail(*args, **kwargs):
        raise AssertionError("no sweep may start")

    monkeypatch.setattr(spectral.sweep.train, "run_sweep", fail)
    out = tmp_path / "out"
    assert _cli("--out", str(out), "--data", str(tmp_path / "nope.txt")) == 2
    assert "neither" in capsys.readouterr().err
    assert not out.exists()


def test_report_only_needs_runs(tmp_path: Path, capsys, no_training):
    out = tmp_path / "out"
    assert _cli("--out", str(out), "--report-only") == 2
    runs = out / "adamw" / "runs.jsonl"
    assert capsys.readouterr().err == (
        f"error: --report-only: no {str(runs)!r}; run the sweep first (without --report-only)\n"
    )
    assert not out.exists()


def test_report_only_renders_what_is_there(tmp_path: Path, no_training):
    (tmp_path / "adamw").mkdir()
    (tmp_path / "adamw" / "runs.jsonl").write_text("")
    assert _cli("--out", str(tmp_path), "--report-only") == 0
    assert no_training["load_data"] == [] and no_training["run_sweep"] == []
    assert no_training["write_report"] == [tmp_path / "adamw"]


# --------------------------------------------------------------------------------------
# base multipliers (--multiplier): config, run key, parser; no training
# --------------------------------------------------------------------------------------


def test_default_multiplier_keeps_the_old_settings_and_keys():
    # runs recorded before --multiplier existed (all at α = 1) must still resume
    assert "multiplier" not in SweepConfig().settings()
    assert SweepConfig(multiplier=1.0).settings() == SweepConfig().settings()
    assert SweepConfig(multiplier={"output": 0.5}).settings()["multiplier"] == {"output": 0.5}


def _meta_fingerprint(cfg: SweepConfig, parameterization: str, width: int) -> tuple[str, dict]:
    from spectral.sweep import Job, build_run, fingerprint

    job = Job(parameterization, width, cfg.depth, -8)
    rec = recipe(cfg.optimizer, parameterization, cfg)
    with torch.device("meta"):
        model, opts = build_run(job, cfg, rec, 256, "meta")
    mults = {"input": model.alpha_input, "hidden": model.alpha_hidden, "output": model.alpha_output}
    return fingerprint(job, cfg, rec, model, opts, "data"), mults


def test_output_multiplier_reaches_every_parameterization_and_the_key():
    cfg = _toy(base_depth=2, depth=2)
    half = replace(cfg, multiplier={"output": 0.5})
    fp1, m1 = _meta_fingerprint(cfg, "sp", 64)
    fp_half, m_half = _meta_fingerprint(half, "sp", 64)
    # SP: the base value at every size
    assert m1 == {"input": 1.0, "hidden": 1.0, "output": 1.0}
    assert m_half == {"input": 1.0, "hidden": 1.0, "output": 0.5}
    assert fp1 != fp_half  # a resumed sweep never mixes α_out settings
    # μP at 2× the base width: α_out = 0.5 × (n_base / n) = 0.25; the rest untouched
    fp_mup, m_mup = _meta_fingerprint(half, "mup", 64)
    assert m_mup == {"input": 1.0, "hidden": 1.0, "output": 0.25}
    assert fp_mup != fp_half
    # the same α_out given as a number for every layer scales input and hidden too
    _, m_all = _meta_fingerprint(replace(cfg, multiplier=0.5), "sp", 64)
    assert m_all == {"input": 0.5, "hidden": 0.5, "output": 0.5}


def test_multiplier_flag_is_parsed_into_the_configs():
    import argparse

    from spectral.cli.sweep import configs_from_args, configure_sweep

    p = argparse.ArgumentParser()
    configure_sweep(p)
    args = p.parse_args(["--out", "x", "--device", "cpu", "--multiplier", "output=0.5,hidden=2",
                         "-O", "adamw", "-O", "muon-kimi+adamw"])
    cfgs = configs_from_args(args)
    assert [c.multiplier for c in cfgs] == [{"output": 0.5, "hidden": 2.0}] * 2
    assert cfgs[0].settings()["multiplier"] == {"output": 0.5, "hidden": 2.0}
    assert configs_from_args(p.parse_args(["--out", "x", "--device", "cpu"]))[0].multiplier == 1.0
    assert configs_from_args(p.parse_args(["--out", "x", "--device", "cpu", "--multiplier", "2"]))[0].multiplier == 2.0


@pytest.mark.parametrize(
    "value, message",
    [
        ("ouput=0.5", "error: --multiplier: unknown key(s) ouput;"),
        ("output=-1", "error: --multiplier: expected a number >= 0, got output=-1\n"),
        ("muon-kimi=2", "error: --multiplier: unknown key(s) muon-kimi;"),
    ],
)
def test_bad_multiplier_is_one_line_before_any_work(tmp_path: Path, capsys, no_training, value, message):
    out = tmp_path / "out"
    assert _cli("--out", str(out), "--multiplier", value) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1
    assert no_training == {"load_data": [], "run_sweep": [], "write_report": []} and not out.exists()


def test_bad_multiplier_syntax_is_a_usage_error(capsys, no_training):
    assert _cli("--out", "x", "--multiplier", "output") == 2
    assert "--multiplier: expected a number, got 'output'" in capsys.readouterr().err
