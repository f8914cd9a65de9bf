"""docs/your-model.md runs: every ```python block, section by section, as a reader pastes it.

Each "## " section is one walkthrough: its python blocks run in order in one namespace,
with `mup_config` importable (generated, through spectral.codegen, from the last
`spectral codegen` command the page shows at or before that section) and the working
directory a fresh tmp_path (the page saves checkpoints). A ```text block right after a
python block is that block's expected output, compared line by line. A block that raises
fails the test, and so does a page that lost its walkthroughs.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re
import shlex
import sys
import types
from pathlib import Path

import pytest

pytest.importorskip("torch")

from spectral.codegen import render, write  # noqa: E402

pytestmark = [pytest.mark.generated, pytest.mark.slow]  # generated: also run on the --vendor form

DOC = Path(__file__).resolve().parents[2] / "docs" / "your-model.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)


def sections(text: str) -> list[dict]:
    """[{title, slug, blocks: [(code, expected output or None)], codegen}] in page order."""
    out, codegen = [], None
    parts = re.split(r"^## (.+)\n", text, flags=re.M)
    for title, body in zip(parts[1::2], parts[2::2], strict=True):
        blocks = []
        fences = list(FENCE.finditer(body))
        for i, m in enumerate(fences):
            lang, code = m.group(1), m.group(2)
            if lang == "bash" and "spectral codegen" in code:
                codegen = next(
                    line for line in code.splitlines() if line.startswith("spectral codegen")
                )
            if lang != "python":
                continue
            expected = None
            nxt = fences[i + 1] if i + 1 < len(fences) else None
            if nxt and nxt.group(1) == "text" and not body[m.end() : nxt.start()].strip():
                expected = nxt.group(2)
            blocks.append((code, expected))
        slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
        out.append({"title": title, "slug": slug, "blocks": blocks, "codegen": codegen})
    return out


def codegen_source(command: str) -> str:
    """The module `command` (a `spectral codegen ... -o mup_config.py` line) writes."""
    ap = argparse.ArgumentParser(exit_on_error=False)
    ap.add_argument("hidden")
    ap.add_argument("--others")
    ap.add_argument("--k", type=int, default=2)
    ap.add_argument("--base-width", type=int, required=True)
    ap.add_argument("--base-depth", type=int, required=True)
    ap.add_argument("--all-roles", action="store_true")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args(shlex.split(command)[2:])
    assert args.output == "mup_config.py", command
    return render(
        args.hidden,
        args.others,
        args.k,
        base_width=args.base_width,
        base_depth=args.base_depth,
        all_roles=args.all_roles,
    )


SECTIONS = [s for s in sections(DOC.read_text()) if s["blocks"]]


def test_page_has_its_walkthroughs():
    slugs = {s["slug"] for s in SECTIONS}
    assert {
        "a-hugging-face-llama",
        "a-nanogpt-model",
        "how-spectral-finds-the-structure",
        "any-other-model-an-adapter",
        "when-something-is-wrong",
        "base-values-per-role",
        "hybrids-and-schedulers",
        "the-check-across-widths",
    } <= slugs
    for s in SECTIONS:
        assert s["codegen"], f"{s['title']}: no `spectral codegen` command before it"
    # the error messages are shown with their output, not just described
    errors = next(s for s in SECTIONS if s["slug"] == "when-something-is-wrong")
    assert sum(expected is not None for _, expected in errors["blocks"]) >= 4


@pytest.mark.parametrize("section", SECTIONS, ids=[s["slug"] for s in SECTIONS])
def test_walkthrough_runs(section, tmp_path, monkeypatch):
    if any("transformers" in code for code, _ in section["blocks"]):
        pytest.importorskip("transformers")
    run_section(section, DOC.name, tmp_path, monkeypatch)


def run_section(section: dict, doc: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run one section's python blocks in order in one namespace, in tmp_path, with its
    `mup_config` importable; compare each block's output with its ```text block."""
    import torch

    write(tmp_path / "mup_config.py", codegen_source(section["codegen"]))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "mup_config", raising=False)
    importlib.invalidate_caches()
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    # tiny models: one thread is faster, and on a loaded machine far faster (no spinning)
    torch.set_num_threads(1)
    # a real module in sys.modules: dataclasses (the nanoGPT stand-in) look their class up
    module = types.ModuleType(f"your_model_{section['slug'].replace('-', '_')}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    try:
        for n, (code, expected) in enumerate(section["blocks"], 1):
            printed = io.StringIO()
            try:
                with contextlib.redirect_stdout(printed):
                    exec(compile(code, f"{doc}:{section['slug']}:{n}", "exec"), namespace)
            except Exception as exc:
                raise AssertionError(
                    f"block {n} of '{section['title']}' raised {type(exc).__name__}: {exc}\n{code}"
                ) from exc
            if expected is not None:
                got = [line.rstrip() for line in printed.getvalue().strip().splitlines()]
                want = [line.rstrip() for line in expected.strip().splitlines()]
                assert got == want, (
                    f"block {n} of '{section['title']}' printed otherwise:\n{got}"
                )
    finally:
        sys.modules.pop("mup_config", None)
        torch.set_num_threads(threads)
