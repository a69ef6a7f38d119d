"""Training a linear-attention model by gradient descent on either engine, recording its loss curve.

The objective is (1/2) E[(y_q - yh)^2] (Zhang-Frei-Bartlett's convention) or, with ``half=False``, the mean
squared error itself (Zhang et al.'s code: the same flow twice as fast); gradient flow's time is t = lr x steps.
The curve records the mean squared error E[(y_q - yh)^2] itself (``loss``: the engine's, on its
batch for the sampled engine) and, where the model allows it, the exact population error of the current
parameters (``exact``), whatever engine trains. Single-layer forms on the exact engine descend the closed-form
gradient (``fast.py``, no autograd)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from ..errors import UserInputError
from ..optim import PlainAdam, PlainSGD
from ..rng import make_generator
from .engines import ExactEngine, linear_engine
from .fast import descend
from .forms import Form, Params, gamma_of, given_params, init_params
from .task import GaussianTask, check_count

COLUMNS = ["step", "t", "loss", "exact"]
OPTIMIZERS = {"sgd": PlainSGD, "adam": PlainAdam}


@dataclass
class LinearRun:
    """A finished run: its curve (one row per record: step, t, loss, exact) and its parameters."""

    form: Form
    task: GaussianTask
    curve: pd.DataFrame
    params: Params
    lr: float
    history: list[np.ndarray] = field(default_factory=list)  # Gamma at each record, when asked for

    @property
    def gamma(self) -> torch.Tensor:
        return gamma_of(self.form, self.params).detach()

    @property
    def final_exact(self) -> float:
        return float(self.curve["exact"].iloc[-1])


def _check_run(lr: float, steps: int, record_every: int) -> None:
    if not lr > 0:
        raise UserInputError(f"lr: must be > 0 (got {lr})")
    for name, value in (("steps", steps), ("record_every", record_every)):
        check_count(name, value)


def train_linear(form: Form, task: GaussianTask, *, lr: float, steps: int, engine: str = "exact", seed: int = 0,
                 init_scale: float = 1e-3, init: Params | None = None, record_every: int = 1,
                 keep_gamma: bool = False, half: bool = True, closed_gradient: bool = True,
                 optimizer: str = "sgd", decay: bool = False, **engine_options) -> LinearRun:
    """Train ``form`` on prompts of ``task`` by ``steps`` steps of gradient descent of size ``lr``.

    ``init``: given initial parameters (else every entry N(0, init_scale^2) from the seed's stream);
    ``engine``: ``exact`` or ``sampled`` (options ``batch``, ``n_prompts``; ``context_draws`` for exact);
    ``keep_gamma``: keep Gamma at each record (single-layer forms); ``half``: descend (1/2) MSE (else MSE);
    ``closed_gradient``: single-layer forms on the exact engine take fast.py's gradient (False: autograd's);
    ``optimizer``: ``sgd`` (gradient descent, the flow's discretisation) or ``adam`` (to reach an optimum on the
    sampled engine, not a flow); ``decay``: the step size falls linearly to 0 over the run."""
    _check_run(lr, steps, record_every)
    if optimizer not in OPTIMIZERS:
        raise UserInputError(f"optimizer {optimizer!r}: not known (allowed: {', '.join(OPTIMIZERS)})")
    dim = task.dim
    params = (given_params(form, dim, init) if init is not None
              else init_params(form, dim, init_scale, make_generator(seed, "linattn:init")))
    if engine == "exact" and form.single_layer and closed_gradient and optimizer == "sgd" and not decay:
        rows, history, final = descend(form, task, {k: v.numpy() for k, v in params.items()}, lr, steps,
                                       record_every, half, keep_gamma)
        return LinearRun(form, task, pd.DataFrame(rows, columns=COLUMNS),
                         {k: torch.from_numpy(v) for k, v in final.items()}, lr, history)
    for p in params.values():
        p.requires_grad_(True)
    train_engine = linear_engine(engine, task, seed, **engine_options)
    exact = train_engine if isinstance(train_engine, ExactEngine) else ExactEngine(task, seed)
    opt = OPTIMIZERS[optimizer](params.values(), lr)
    rows, history = [], []
    for step in range(int(steps) + 1):
        loss = train_engine.loss(form, params)
        if step % record_every == 0 or step == steps:
            with torch.no_grad():
                ex = loss if exact is train_engine else (
                    exact.loss(form, params) if form.kind != "full" else torch.tensor(float("nan")))
            rows.append((step, step * lr, float(loss.detach()), float(ex.detach())))
            if keep_gamma and form.single_layer:
                history.append(gamma_of(form, params).detach().numpy().copy())
        if step == steps:
            break
        opt.zero_grad()
        if decay:
            opt.lr = lr * (1 - step / steps)
        (0.5 * loss if half else loss).backward()
        opt.step()
    curve = pd.DataFrame(rows, columns=COLUMNS)
    final = {k: v.detach() for k, v in params.items()}
    return LinearRun(form, task, curve, final, lr, history)
