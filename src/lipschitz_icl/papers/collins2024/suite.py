"""The Collins et al. suite's one experiment: the sweep (sweep.py), then each claim judged by its own file."""

from __future__ import annotations

from ...experiments.claims import ClaimResult
from ...experiments.figures import captioned
from ...experiments.registry import experiment
from ...experiments.runner import Context, single_threaded, write_data
from . import isotropy, linear, nadaraya, window
from .sweep import sweep

STATEMENTS = {**window.STATEMENTS, **isotropy.STATEMENTS, **linear.STATEMENTS, **nadaraya.STATEMENTS}
CAPTIONS = {**window.CAPTIONS, **isotropy.CAPTIONS, **linear.CAPTIONS, **nadaraya.CAPTIONS}


@experiment("CL1", "CL2", "CL3", "CL4", "CL5", "CL6", suites=("collins",), statements=STATEMENTS)
@captioned(CAPTIONS)
@single_threaded
def exp_collins(ctx: Context) -> list[ClaimResult]:
    """Softmax and linear attention trained along L, tau and N on the sphere; CL1-CL6."""
    table, _ = sweep(ctx)
    data = [write_data(ctx, "collins_sweep", table)]
    return [*window.judge_window(ctx, table, data), isotropy.judge_isotropy(ctx, table, data, isotropy.control(ctx)),
            linear.judge_linear(ctx, table, data), nadaraya.judge_nadaraya(ctx, table, data)]
