"""theory.py beyond the worked case: T_f, lambda_max / eta_max at Q^(0), theory_report, and the
``theory`` CLI."""

import json
import math

import pytest
import torch
from typer.testing import CliRunner

from lipschitz_icl.cli import app
from lipschitz_icl.config import load_config, validate_config
from lipschitz_icl.problem import build_problem
from lipschitz_icl.tasks import KernelEstimate
from lipschitz_icl.theory import (
    _nondegeneracy,
    eta_max,
    flat_time_scale,
    hessian_top_eigenvalue_at,
    nondegeneracy,
    theory_report,
    training_objective_at_init,
)

runner = CliRunner()


@pytest.mark.parametrize("d,L", [(4, 1.0), (5, 2.0), (9, 3.0)])
def test_report_worked_case(d, L):
    """Orthonormal features, linear class: L* = sqrt(d/2), regime by L against it."""
    rep = theory_report(validate_config({"features": {"K": d, "d": d}, "task": {"L": L}, "engine": {"draws": 16}}))
    assert rep["L_star"] == pytest.approx(math.sqrt(d / 2))
    assert rep["Delta"] == pytest.approx(math.sqrt(2)) and rep["delta"] == pytest.approx(1 / math.sqrt(d))
    assert rep["regime"] == ("flat" if L < math.sqrt(d / 2) * 0.9 else "sharp")
    for key in ("Delta", "delta", "delta_se", "L", "L_star", "regime", "T_f", "eta_max", "lambda_max", "c", "band"):
        assert key in rep
    assert rep["eta_max"] == pytest.approx(2 / rep["lambda_max"])


def test_flat_time_scale_formula_and_slopes():
    base = flat_time_scale(5, 1e-3, 1.0, 0.5, 1.0, math.sqrt(2))
    assert base == pytest.approx(5 * math.log(5e3) / (0.25 * 2))
    assert flat_time_scale(5, 1e-3, 1.0, 0.5, 2.0, math.sqrt(2)) == pytest.approx(base / 4)  # L^-2
    assert flat_time_scale(5, 1e-3, 0.5, 0.5, 1.0, math.sqrt(2)) == pytest.approx(base * 2)  # eta^-1
    assert flat_time_scale(5, 1e-3, 1.0, 0.5, 1.0, 2 * math.sqrt(2)) == pytest.approx(base / 4)  # Delta^-2
    assert flat_time_scale(5, 1e-3, 1.0, 0.0, 1.0, 1.0) == math.inf


@pytest.mark.parametrize("method", ["lanczos", "power"])
@pytest.mark.parametrize("diag", [[-5.0, 1.0, 2.0, 3.0], [-3.0, 3.0, 1.0, 0.5], [0.5, 1.0, 4.0, 4.0]])
def test_top_eigenvalue_of_a_quadratic(method, diag):
    """Known spectra, including a dominant negative eigenvalue and a +-lambda pair."""
    R = torch.linalg.qr(torch.randn(4, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64))[0]
    A = R @ torch.diag(torch.tensor(diag, dtype=torch.float64)) @ R.T
    x0 = torch.zeros(4, dtype=torch.float64)
    top = hessian_top_eigenvalue_at(lambda x: 0.5 * x @ A @ x, x0, 500, 1e-10, method=method)
    assert top.value == pytest.approx(max(diag), rel=1e-6)
    assert top.converged


SMALL = [
    {"features": {"kind": "gaussian", "K": 3, "d": 4}, "task": {"kind": "relu_net", "kernel_samples": 256}},
    {"features": {"kind": "orthonormal", "K": 3, "d": 3}, "engine": {"counts": "mean_field"}},
    {"features": {"kind": "simplex", "K": 4, "d": 3}, "task": {"kind": "sinusoid", "kernel_samples": 256},
     "engine": {"draws": 32}, "model": {"init": "random", "init_scale": 0.5}},
    {"features": {"kind": "gaussian", "K": 3, "d": 3, "noise": 0.3}, "engine": {"kind": "sampled", "batch": 64},
     "task": {"label_noise": 0.1}},
]


@pytest.mark.parametrize("cfg", SMALL)
def test_eta_max_matches_dense_hessian(cfg):
    """2 / lambda_max from Hessian-vector products equals the dense Hessian's, on small problems
    (both engines, Q^(0) zero or random)."""
    problem = build_problem(validate_config({**cfg, "eval": {"functions": 16}}))
    loss_fn, Q0 = training_objective_at_init(problem)
    n = Q0.numel()
    H = torch.autograd.functional.hessian(loss_fn, Q0).reshape(n, n)
    lam = float(torch.linalg.eigvalsh(H)[-1])
    assert lam > 0
    assert eta_max(problem) == pytest.approx(2 / lam, rel=1e-6)
    assert eta_max(problem, iters=300, method="power") == pytest.approx(2 / lam, rel=1e-3)


def test_eta_max_scales_as_one_over_L_squared_for_linear():
    """Linear class: Sigma is proportional to L^2, so is the loss at every Q; eta_max ~ 1/L^2."""
    e1 = eta_max(build_problem(load_config(None, ["task.L=1", "engine.draws=32"])))
    e2 = eta_max(build_problem(load_config(None, ["task.L=2", "engine.draws=32"])))
    assert e2 == pytest.approx(e1 / 4, rel=1e-6)


def test_kernel_objective_at_init_is_the_engine_loss():
    """training_objective_at_init evaluates exactly what the engine trains on."""
    from lipschitz_icl.engines import build_engine

    problem = build_problem(load_config(None, ["engine.draws=32", "model.init=random", "model.init_scale=1"]))
    loss_fn, Q0 = training_objective_at_init(problem)
    assert float(loss_fn(Q0)) == pytest.approx(build_engine(problem).forward_backward().loss, rel=1e-12)


def test_cli_theory_quickstart_sharp_and_flat(quickstart_path, tmp_path):
    res = runner.invoke(app, ["theory", str(quickstart_path), "--json", str(tmp_path / "t.json")])
    assert res.exit_code == 0, res.output
    assert "1.58114" in res.stdout and "sharp" in res.stdout and "constant unknown" in res.stdout
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["regime"] == "sharp" and data["L_star"] == pytest.approx(math.sqrt(2.5))
    res = runner.invoke(app, ["theory", str(quickstart_path), "task.L=1"])
    assert res.exit_code == 0, res.output
    assert "flat" in res.stdout and "sharp" not in res.stdout
    res = runner.invoke(app, ["theory", str(quickstart_path), "task.L=1.6"])
    assert "near-threshold" in res.stdout


@pytest.mark.parametrize("args", [["nope.yaml"], ["task.L=-1"], ["task.kind=nope"]])
def test_cli_theory_bad_input(args):
    res = runner.invoke(app, ["theory", *args])
    assert res.exit_code == 2
    assert "Traceback" not in res.output and len(res.stderr.strip().splitlines()) == 1


def test_delta_of_an_exact_kernel_is_kept_by_its_inputs_only():
    """nondegeneracy keeps (delta, se) of exact kernels for the next configs: equal inputs give the kept numbers,
    any other Sigma, V or L its own; Monte-Carlo kernels are computed every time."""
    gen = torch.Generator().manual_seed(3)
    V = torch.randn(4, 3, generator=gen, dtype=torch.float64)
    F = torch.randn(50, 3, generator=gen, dtype=torch.float64)
    sigma = F.T @ F / 50
    exact = KernelEstimate(sigma, torch.zeros_like(sigma), 0)
    for s, v, L in ((sigma, V, 2.0), (sigma, V, 3.0), (sigma * 1.5, V, 2.0), (sigma, V * 2, 2.0), (sigma, V, 2.0)):
        kernel = KernelEstimate(s, torch.zeros_like(s), 0)
        assert nondegeneracy(kernel, v, L) == _nondegeneracy(kernel, v, L)
    assert nondegeneracy(exact, V, 2.0) != nondegeneracy(exact, V, 3.0)
    mc = KernelEstimate(sigma, torch.zeros_like(sigma), 50, F)
    assert nondegeneracy(mc, V, 2.0) == _nondegeneracy(mc, V, 2.0) and nondegeneracy(mc, V, 2.0)[1] > 0
