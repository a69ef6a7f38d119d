"""Closed forms for a single layer of linear attention on Gaussian prompts (yh = x_q^T Gamma h).

The mean squared error is quadratic in Gamma (``engines.exact_single_loss``); its minimiser under a task with
Omega = E[w w^T] and C = E[h h^T] is Gamma* = Omega Lambda C^{-1}, which for w ~ N(0, I) and noise sigma is
    Gamma* = ((1 + 1/N) Lambda + (tr Lambda + sigma^2)/N I)^{-1}
(Zhang-Frei-Bartlett's global optimum; Mahankali et al.'s one step of preconditioned GD). Restricted to the
span of the top-r eigenvectors of Lambda (what a model that has learned r principal components holds), the
error is tr Lambda - sum_{i <= r} lambda_i^2 / ((1 + 1/N) lambda_i + tr Lambda / N): with tr Lambda = 1 the
plateau values 1 - sum_{i <= r} lambda_i / (1 + (1 + 1/lambda_i)/N) of Zhang et al.'s saddle-to-saddle
dynamics."""

from __future__ import annotations

import numpy as np
import torch

from .engines import exact_single_loss
from .task import GaussianTask


def optimal_gamma(task: GaussianTask) -> torch.Tensor:
    """Gamma* = Omega Lambda C^{-1}, the minimiser of the population error (C = E[h h^T])."""
    return task.omega() @ task.cov @ torch.linalg.inv(task.context_moment())


def single_error(gamma: torch.Tensor, task: GaussianTask) -> float:
    """E[(y_q - x_q^T Gamma h)^2] under ``task`` (a test distribution may differ from the training one)."""
    return float(exact_single_loss(torch.as_tensor(gamma, dtype=task.cov.dtype), task))


def optimal_error(task: GaussianTask) -> float:
    """The smallest population error a single layer reaches on ``task``."""
    return single_error(optimal_gamma(task), task)


def plateau_losses(eigenvalues, n_context: int, noise: float = 0.0) -> np.ndarray:
    """Errors after learning the top 0, 1, ..., D principal components (w ~ N(0, I), diagonal Lambda), each
    divided by E[y^2] = tr Lambda + sigma^2... of the query: entry r is (tr Lambda - sum_{i <= r} lambda_i^2 /
    ((1 + 1/N) lambda_i + (tr Lambda + sigma^2)/N) + sigma^2) / (tr Lambda + sigma^2), lambdas in decreasing
    order."""
    lam = np.sort(np.asarray(eigenvalues, dtype=float))[::-1]
    total, n = lam.sum(), n_context
    gains = lam ** 2 / ((1 + 1 / n) * lam + (total + noise ** 2) / n)
    return (total + noise ** 2 - np.concatenate([[0.0], np.cumsum(gains)])) / (total + noise ** 2)
