"""Every import path and source path the README and docs/ name exists.

In the code of README.md and docs/**/*.md (fenced blocks and inline code spans):
``from spectral.x import y`` must import; a dotted ``spectral.x.y`` must be a module or an
attribute of one (``spectral.codegen.load_generated``); a path ``spectral/x/y.py`` (or a
folder ``spectral/x/``) must be in the repository. A module that needs an extra that is not
installed (torch, jax, flax) is skipped, not failed.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
_SPAN = re.compile(r"`([^`\n]+)`")
_FROM = re.compile(r"^\s*from (spectral[\w.]*) import \(?([\w, ]+)", re.M)
_DOTTED = re.compile(r"(?<![\w./-])spectral(?:\.[A-Za-z_]\w*)+")
_FILE = re.compile(r"(?<![\w./-])spectral/[\w/]*(?:\.py|/)")


def _code(text: str) -> list[str]:
    """The page's fenced blocks, then its inline code spans (outside the blocks)."""
    blocks = _FENCE.findall(text)
    prose = _FENCE.sub("", text)
    return blocks + _SPAN.findall(prose)


def _named() -> dict[str, set[str]]:
    """Kind ("import", "dotted", "file") → what the pages name, as "page: path"."""
    out: dict[str, set[str]] = {"import": set(), "dotted": set(), "file": set()}
    for page in PAGES:
        where = page.relative_to(ROOT)
        for code in _code(page.read_text(encoding="utf-8")):
            for module, names in _FROM.findall(code):
                for name in filter(None, (n.strip() for n in names.split(","))):
                    out["import"].add(f"{where}: {module}:{name}")
            out["dotted"] |= {f"{where}: {m}" for m in _DOTTED.findall(code)}
            out["file"] |= {f"{where}: {m}" for m in _FILE.findall(code)}
    return out


NAMED = _named()


def _resolve(dotted: str) -> object:
    """The module ``dotted`` names, or the attribute of the deepest module before it."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and not exc.name.startswith("spectral"):
                pytest.skip(f"{name} needs {exc.name}, not installed")
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)  # AttributeError: the doc names what is not there
        return obj
    raise AssertionError(f"no module in {dotted}")


def test_the_pages_name_paths():
    """The scan finds what the pages are known to name (it would pass vacuously otherwise)."""
    assert "README.md: spectral.models:GPT" in NAMED["import"]
    assert any(p.endswith(": spectral.torch") for p in NAMED["dotted"])
    assert any(p.startswith("docs/") for kind in NAMED.values() for p in kind)


@pytest.mark.parametrize("named", sorted(NAMED["import"]))
def test_every_documented_import_imports(named):
    module, name = named.split(": ", 1)[1].split(":")
    assert hasattr(_resolve(module), name), named


@pytest.mark.parametrize("named", sorted(NAMED["dotted"]))
def test_every_documented_dotted_path_resolves(named):
    _resolve(named.split(": ", 1)[1])


@pytest.mark.parametrize("named", sorted(NAMED["file"]))
def test_every_documented_source_path_exists(named):
    assert (ROOT / named.split(": ", 1)[1]).exists(), named
