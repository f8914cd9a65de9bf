"""No test compares float training bits with a file written on another machine.

float32 kernels sum in an order that depends on the CPU's instruction set (AVX2, AVX-512,
none), so the last bits of a training run are the machine's, not the code's. A test may
compare two computations of one process bit for bit (the importing and the vendored config
in ``tests/codegen/test_config_golden.py``) and a committed record within a stated tolerance
of float32 rounding, never committed bits. This test finds the forms such a comparison takes:
a record per CPU capability (a file named ``*.AVX2.*``, a test asking torch for its
capability), a float kept as its exact bits (``float.hex`` text in a committed file, a test
that reads one back with ``fromhex`` or writes ``.item().hex()``), a tensor kept as a hash of
its bytes.
"""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
HERE = Path(__file__).resolve()

CAPABILITY_NAME = re.compile(r"\.(AVX\w*|DEFAULT|ZVECTOR|SVE\d*|VSX\w*|NEON)\.", re.IGNORECASE)
"""A file kept per CPU instruction set (torch.backends.cpu.get_cpu_capability's names)."""
HEX_FLOAT = re.compile(r"[-+]?0x[01]\.[0-9a-f]+p[-+]?\d+", re.IGNORECASE)
"""A float written by float.hex: its exact bits."""
BITS_IN_A_TEST = {
    "asks torch for the CPU's capability (one record per machine)": re.compile(
        r"get_cpu_capability"
    ),
    "reads a float back from its exact bits": re.compile(r"\bfromhex\s*\("),
    "keeps a float as its exact bits": re.compile(r"\.item\(\)\s*\.hex\(\)"),
    "keeps a tensor as a hash of its bytes": re.compile(r"sha\d+\(.{0,200}?tobytes\("),
}


def _files() -> list[Path]:
    return sorted(
        p for p in TESTS.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p != HERE
    )


def test_no_record_per_cpu_capability():
    named = [str(p.relative_to(TESTS)) for p in _files() if CAPABILITY_NAME.search(p.name)]
    assert not named, f"records kept per CPU instruction set: {named}"


def test_no_committed_float_bits():
    found = []
    for path in _files():
        if path.suffix in {".py", ".pyc"}:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # binary data: no float.hex text in it
            continue
        if match := HEX_FLOAT.search(text):
            found.append(f"{path.relative_to(TESTS)}: {match.group()}")
    assert not found, f"committed files keeping floats as their exact bits: {found}"


def test_no_test_compares_float_bits_with_a_file():
    found = []
    for path in _files():
        if path.suffix != ".py":
            continue
        text = path.read_text(encoding="utf-8")
        found += [
            f"{path.relative_to(TESTS)} {why}"
            for why, pattern in BITS_IN_A_TEST.items() if pattern.search(text)
        ]
    assert not found, found


def test_the_scan_finds_the_old_golden_record():
    """What the scan looks for, on the forms the old per-capability record took."""
    assert CAPABILITY_NAME.search("training-adamw.AVX512.json")
    assert CAPABILITY_NAME.search("training-adamw.avx2.json")
    assert not CAPABILITY_NAME.search("training-adamw.json")
    assert HEX_FLOAT.search('"losses": ["0x1.6340e80000000p+2"]')
    assert not HEX_FLOAT.search('"sha": "0x1f2e", "loss": 5.55')
    old = (
        "losses.append(loss.item().hex())\n"
        "capability = torch.backends.cpu.get_cpu_capability()\n"
        "hashlib.sha256(p.detach().contiguous().numpy().tobytes()).hexdigest()\n"
        "float.fromhex(x)\n"
    )
    assert all(pattern.search(old) for pattern in BITS_IN_A_TEST.values())
