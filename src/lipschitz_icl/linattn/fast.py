"""The exact engine's single-layer forms without autograd: the loss and its gradient in closed form, in NumPy.

With B = Lq Omega Lambda, C = E[h h^T] and c0 = tr(Lq Omega) + sigma^2, the error is
    L(Gamma) = c0 - 2 <Gamma, B> + <Gamma, Lq Gamma C>,     dL/dGamma = G = 2 (Lq Gamma C - B),
and the chain rule through Gamma(params) is written out per form (merged: Gamma = sum_h v_h W_h^T; separate:
Gamma = sum_h v_h Q_h^T K_h; gamma; gd_layers with one layer). A step costs a few microseconds instead of autograd's
few hundred; ``engines.ExactEngine`` (autograd) gives the same numbers (tests/test_linattn.py)."""

from __future__ import annotations

import numpy as np

from .forms import Form, gamma_of
from .task import GaussianTask

Arrays = dict[str, np.ndarray]


class ExactSingle:
    """The closed-form error of yh = x_q^T Gamma h under ``task``, and its gradient."""

    def __init__(self, task: GaussianTask) -> None:
        lq, om = task.lam_q.numpy(), task.omega().numpy()
        self.lq, self.c = lq, task.context_moment().numpy()
        self.b = lq @ om @ task.cov.numpy()
        self.c0 = float(np.trace(lq @ om) + task.noise ** 2)

    def loss(self, gamma: np.ndarray) -> float:
        return float(self.c0 - 2 * np.sum(gamma * self.b) + np.sum(gamma * (self.lq @ gamma @ self.c)))

    def grad(self, gamma: np.ndarray) -> np.ndarray:
        return 2 * (self.lq @ gamma @ self.c - self.b)


def param_grads(form: Form, p: Arrays, g: np.ndarray) -> Arrays:
    """The gradient of each parameter from G = dL/dGamma (the chain rule through Gamma(params))."""
    if form.kind == "merged":  # Gamma = sum_h v_h W_h^T
        return {"v": np.einsum("ij,hji->h", g, p["W"]), "W": p["v"][:, None, None] * g.T[None]}
    if form.kind == "separate":  # Gamma = sum_h v_h Q_h^T K_h
        qk = np.einsum("hri,hrj->hij", p["Q"], p["K"])
        return {"v": np.einsum("ij,hij->h", g, qk),
                "Q": p["v"][:, None, None] * np.einsum("hrj,ij->hri", p["K"], g),
                "K": p["v"][:, None, None] * np.einsum("hri,ij->hrj", p["Q"], g)}
    return {"Gamma": g} if form.kind == "gamma" else {"A": g[None]}


def descend(form: Form, task: GaussianTask, params: Arrays, lr: float, steps: int, record_every: int,
            half: bool, keep_gamma: bool) -> tuple[list[tuple[int, float, float, float]], list[np.ndarray], Arrays]:
    """Gradient descent on the exact error: the records (step, t, loss, loss), Gamma at each record when asked,
    and the final parameters."""
    exact, scale = ExactSingle(task), (0.5 if half else 1.0) * lr
    p = {k: v.copy() for k, v in params.items()}
    rows, history = [], []
    for step in range(int(steps) + 1):
        gamma = gamma_of(form, p)
        if step % record_every == 0 or step == steps:
            value = exact.loss(gamma)
            rows.append((step, step * lr, value, value))
            if keep_gamma:
                history.append(gamma.copy())
        if step == steps:
            break
        for name, grad in param_grads(form, p, exact.grad(gamma)).items():
            p[name] -= scale * grad
    return rows, history, p
