"""The Lu et al. suite's one experiment: LU1's sweep along tau at several d, then LU2's sweep along kappa (with the
reproduction of the authors' saved values)."""

from __future__ import annotations

from ...experiments.claims import ClaimResult
from ...experiments.figures import captioned
from ...experiments.registry import experiment
from ...experiments.runner import Context, single_threaded, write_data
from . import approach, transition

STATEMENTS = {**approach.STATEMENTS, **transition.STATEMENTS}
CAPTIONS = {**approach.CAPTIONS, **transition.CAPTIONS}


@experiment("LU1", "LU2", suites=("lu",), statements=STATEMENTS)
@captioned(CAPTIONS)
@single_threaded
def exp_lu(ctx: Context) -> list[ClaimResult]:
    """Ridge-fitted linear attention at finite d against the asymptotic theory: along tau (LU1), along kappa (LU2)."""
    level = ctx.sizes.level
    lu1, table1 = approach.judge(ctx, level, [], seed0=ctx.seed)
    lu1.data = [write_data(ctx, "lu_approach", table1)]
    lu2, table2, repro = transition.judge(ctx, level, [], seed0=ctx.seed)
    lu2.data = [write_data(ctx, "lu_transition", table2), write_data(ctx, "lu_saved_reproduction", repro)]
    return [lu1, lu2]
