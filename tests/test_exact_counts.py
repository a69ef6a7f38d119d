"""engine.counts: exact: the expectation over the context counts by enumeration (every count vector with its
multinomial probability), in the loss, its closed-form gradient, the batched trainer and the optimum."""

from __future__ import annotations

import math

import pytest
import torch
from typer.testing import CliRunner

import lipschitz_icl as li
from lipschitz_icl.batch import run_many
from lipschitz_icl.cli import app
from lipschitz_icl.engines import kernel_loss
from lipschitz_icl.engines.kernel_grad import kernel_loss_grad
from lipschitz_icl.engines.kernel_spec import EXACT_MAX, draw_counts, exact_counts
from lipschitz_icl.features import FeatureSet
from lipschitz_icl.optimum import ScoreObjective, population_optimum
from lipschitz_icl.problem import build_problem

SMALL = ["features.K=3", "features.d=3", "prompt.N=6", "features.probs=[0.5, 0.3, 0.2]", "engine.counts=exact",
         "train.steps=40", "eval.functions=8"]


def test_every_count_vector_once_with_its_multinomial_probability():
    p = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    counts, w = exact_counts(4, p)
    assert counts.shape == (math.comb(6, 2), 3) and len({tuple(c.tolist()) for c in counts}) == counts.shape[0]
    assert torch.all(counts.sum(1) == 4) and math.isclose(float(w.sum()), 1.0, rel_tol=1e-12)
    c = torch.tensor([2.0, 1.0, 1.0])
    i = next(i for i, row in enumerate(counts) if torch.equal(row, c))
    assert math.isclose(float(w[i]), 12 * 0.25 * 0.3 * 0.2, rel_tol=1e-12)  # 4!/(2!1!1!) p0^2 p1 p2


def _inputs(cfg_extra):
    problem = build_problem(li.load_config(None, [*SMALL, *cfg_extra]))
    torch.manual_seed(0)
    M = 0.7 * torch.randn(3, 3, dtype=torch.float64)
    return problem, M


def test_the_closed_form_with_weights_is_the_autograd_expectation():
    problem, M = _inputs(["task.label_noise=0.3"])
    counts, w = exact_counts(6, problem.features.p.double())
    sigma, p = problem.kernel.sigma.double(), problem.features.p.double()
    Mg = M.clone().requires_grad_(True)
    ref, attn = kernel_loss(Mg, counts, sigma, p, tau=0.3, weights=w)
    ref.backward()
    c = counts.T.contiguous().unsqueeze(0)
    out = kernel_loss_grad(M.unsqueeze(0), c, 1 / c.clamp(min=1), sigma.unsqueeze(0), p.unsqueeze(0),
                           torch.tensor([0.09], dtype=torch.float64), weights=w.unsqueeze(0))
    torch.testing.assert_close(out.loss[0], ref.detach(), rtol=1e-12, atol=0)
    torch.testing.assert_close(out.grad[0], Mg.grad, rtol=1e-10, atol=1e-14)
    torch.testing.assert_close(out.attn[0], attn.detach(), rtol=1e-12, atol=1e-15)


def test_the_exact_loss_is_the_limit_of_many_draws():
    problem, M = _inputs([])
    fs = FeatureSet(problem.features.V.double(), problem.features.p.double(), 0.0)
    sigma, p = problem.kernel.sigma.double(), fs.p
    counts, w = exact_counts(6, p)
    exact, _ = kernel_loss(M, counts, sigma, p, weights=w)
    draws = draw_counts(fs, 6, 200_000, torch.Generator().manual_seed(1))
    per_draw = torch.stack([kernel_loss(M, chunk, sigma, p)[0] for chunk in draws.split(20_000)])
    se = float(per_draw.std() / math.sqrt(len(per_draw)))
    assert abs(float(per_draw.mean() - exact)) <= 4 * se + 1e-12


def test_a_run_with_exact_counts_is_the_same_alone_and_in_a_batch():
    cfgs = [li.load_config(None, [*SMALL, f"task.L={L}"]) for L in (1.0, 2.0)]
    alone = [li.run(c, write=False) for c in cfgs]
    batched = run_many(cfgs)
    for a, b in zip(alone, batched, strict=True):
        assert a.metrics["value"].equals(b.metrics["value"])
    assert alone[1].summary["final_loss"] < alone[1].metrics.query("step == 0 and metric == 'loss'")["value"].iloc[0]


def test_the_optimum_takes_the_exact_law():
    problem = build_problem(li.load_config(None, SMALL))
    opt = population_optimum(ScoreObjective(problem), L=1.0, tau=1.0)
    assert opt.converged and 0 < opt.min_attn < 1


TOO_MANY = ["prompt.N=200", "features.K=6", "features.d=6", "features.probs=uniform"]  # 2.9e9 count vectors


@pytest.mark.parametrize("extra,needle", [(TOO_MANY, f"{EXACT_MAX:,}"), (["engine.fused=true"], "engine.fused")])
def test_what_exact_counts_cannot_do_is_one_line(extra, needle):
    res = CliRunner().invoke(app, ["run", *SMALL, *extra])
    assert res.exit_code == 2 and needle in res.output and "Traceback" not in res.output
