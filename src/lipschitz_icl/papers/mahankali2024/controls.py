"""Controls of MH1: its rule on predictors evaluated on drawn prompts (five seeds, D = 4, N = 16, both Lambdas).
Null: the Bayes-optimal estimator (least squares on the context; nonlinear in the context) in place of the trained
layer, and two preconditioned GD steps; both beat one GD step. Planted: one GD step with Gamma* perturbed by 2%
(what a trained layer that has reached the optimum looks like)."""

from __future__ import annotations

import torch

from ...baselines import least_squares  # the Bayes-optimal estimator for noiseless labels with N >= D
from ...experiments.controls import Controls, case, controls, controls_from
from ...linattn import Form, GaussianTask, gamma_predict, optimal_gamma, predict
from ...rng import make_generator
from .one_step import covariances, gd_step, mh1_rule

SEEDS, DIM, N, PROMPTS = 5, 4, 16, 4096


def _rel(candidate) -> dict[str, list[float]]:
    """Lambda's name -> per seed err(candidate) / err(GD step) - 1 on drawn prompts."""
    out = {}
    for name, cov in covariances(DIM).items():
        task = GaussianTask.make(cov, N)
        out[name] = []
        for seed in range(SEEDS):
            x, y, xq, yq = task.draw(PROMPTS, make_generator(seed, "mahankali:controls"))
            pred = candidate(task, seed, x, y, xq)
            err, gd = (float(((p - yq) ** 2).mean()) for p in (pred, gd_step(task, x, y, xq)))
            out[name].append(err / gd - 1)
    return out


def _two_steps(task, seed, x, y, xq):
    gamma = optimal_gamma(task)
    return predict(Form("gd_layers", layers=2), {"A": torch.stack([gamma, 0.3 * gamma])}, x, y, xq)


def _perturbed(task, seed, x, y, xq):
    gamma = optimal_gamma(task)
    noise = torch.randn(gamma.shape, generator=make_generator(seed, "mahankali:perturb"), dtype=gamma.dtype)
    g = gamma + 0.02 * gamma.norm() * noise / noise.norm()
    return gamma_predict(g, x, y, xq)


MH1_CASES = {
    "null": (lambda t, s, x, y, xq: least_squares(x, y, xq),
             "the Bayes-optimal estimator (least squares on the context): error near 0, far below one GD step"),
    "null_two_steps": (_two_steps, "two preconditioned GD steps (A_1 = Gamma*, A_2 = 0.3 Gamma*): below one step"),
    "planted": (_perturbed, "one GD step with Gamma* perturbed by 2% (Frobenius): at the optimum's error"),
}


@controls("MH1")
def mh1_controls() -> Controls:
    """MH1's rule on real predictors evaluated on drawn prompts."""
    def read(candidate, how: str):
        sup, ref, ivs = mh1_rule(_rel(candidate))
        return case(sup, ref, {k: iv[0] for k, iv in ivs.items()}, how)

    return controls_from(MH1_CASES, read)
