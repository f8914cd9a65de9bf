"""What a sweep that trains nothing imports: ``spectral sweep --report-only`` checks the plan
(the roles its options name, read from the reference model built at a small size) and
renders the records there, and must not import ``torch._dynamo`` (about 2.6 s of CPU).

It did: the roles' model was built on the meta device, where torch's init functions run
through ``torch._refs``, whose wrapper imports ``torch._dynamo`` on first use. A sweep that
trains (``--estimate`` times real steps) imports it anyway: every ``torch.optim`` optimizer's
``add_param_group`` and ``step`` import it on their first call (torch/optim/optimizer.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow  # a subprocess importing torch: seconds on the 2-core CPU
def test_report_only_imports_no_dynamo(tmp_path: Path):
    (tmp_path / "adamw").mkdir()
    (tmp_path / "adamw" / "runs.jsonl").write_text("")
    code = (
        "import contextlib, io, sys\n"
        "from spectral.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    rc = main(['sweep', '--out', {str(tmp_path)!r}, '--report-only', '--no-progress'])\n"
        "import spectral.sweep.checks as checks\n"
        "sys.stderr.write(f'BUILT={checks.model_roles.cache_info().currsize} ')\n"
        "sys.stderr.write('ROLES=' + ','.join(checks.model_roles('gpt', 0, 1)) + ' ')\n"
        "sys.stderr.write('DYNAMO=' + str('torch._dynamo' in sys.modules))\n"
        "sys.exit(rc)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    # the plan's roles were read from the model (the check ran), and dynamo stayed out
    assert p.stderr.endswith(
        "BUILT=1 ROLES=input_weight,hidden_weight,output_weight,input_bias,hidden_bias DYNAMO=False"
    ), p.stderr
