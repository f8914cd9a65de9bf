"""docs/training-stacks.md runs: every ```python block, section by section, as a reader
pastes it (the runner of tests/docs/test_docs_your_model.py: one namespace per section,
`mup_config` generated from the page's `spectral codegen` command, a ```text block after a
python block is its expected output). The litgpt section runs on a stand-in with litgpt's
names (tests/litgpt_standin.py): litgpt 0.5.13 and transformers 5 do not install together."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("lightning")
pytest.importorskip("accelerate")

import litgpt_standin  # noqa: E402
from test_docs_your_model import run_section, sections  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

DOC = Path(__file__).resolve().parents[2] / "docs" / "training-stacks.md"
SECTIONS = [s for s in sections(DOC.read_text()) if s["blocks"]]


def test_page_has_a_section_per_stack():
    assert {s["slug"] for s in SECTIONS} == {
        "lightning-trainer",
        "lightning-manual-optimization",
        "lightning-fabric",
        "hugging-face-accelerate",
        "litgpt",
        "schedulers-that-keep-the-ratios",
        "torch-compile",
    }


@pytest.mark.slow  # trains in every stack, compiles
@pytest.mark.parametrize("section", SECTIONS, ids=[s["slug"] for s in SECTIONS])
def test_section_runs(section, tmp_path, monkeypatch):
    litgpt = types.ModuleType("litgpt")
    litgpt.GPT, litgpt.Config = litgpt_standin.GPT, litgpt_standin.Config  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "litgpt", litgpt)
    run_section(section, DOC.name, tmp_path, monkeypatch)
