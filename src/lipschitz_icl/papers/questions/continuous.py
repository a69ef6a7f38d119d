"""questions/continuous.py"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from ... import plots
from ...baselines import nadaraya_watson
from ...engines import make_generator
from ...experiments.claims import ClaimResult, claim
from ...experiments.controls import Controls, case, controls, controls_from
from ...experiments.figures import captioned, plain_log_ticks
from ...experiments.measure import loglog_slope
from ...experiments.registry import experiment
from ...experiments.runner import (
    Context,
    grid,
    single_threaded,
    write_data,
)
from ...models import ReducedAttention
from ...optim import PlainAdam
from ...tasks import make_task

STATEMENTS = {  # the claims this file tests, word for word as the report and docs/CLAIMS.md give them
    "R6": "No context token close to the query (R6): with continuous inputs the trained attention acts as a kernel "
    "smoother whose sharpness grows with L: ||Q|| increases and the attention window shrinks as L grows "
    "(kernel-regression theory with label noise: ||Q|| ~ L^(4/(m+2)), m the inputs' dimension).",
}


CAPTIONS = {  # figure stem -> what is plotted, what to look for, what would contradict the claim
    "ext_continuous": (
        "Continuous inputs (no context token at the query): left, ||Q||_2 and the attention window against L, log-log "
        "(dotted: the kernel-regression slope); right, error on unseen functions of the trained attention and of "
        "Nadaraya-Watson with a leave-one-out bandwidth. Look for ||Q|| rising and the window shrinking as L grows. "
        "||Q|| flat or falling, or the window widening with L, contradicts R6."),
}


def _sphere(shape: tuple[int, ...], d: int, gen: torch.Generator) -> torch.Tensor:
    x = torch.randn(*shape, d, generator=gen, dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


def _prompts(task, B: int, N: int, d: int, tau: float, gen: torch.Generator):
    x = _sphere((B, N + 1), d, gen)  # continuous inputs: no context token equals the query
    y = task.evaluate(task.sample(B, gen, torch.float64), x)
    y_ctx = y[:, :N] + tau * torch.randn(B, N, generator=gen, dtype=torch.float64)
    return x[:, :N], y_ctx, x[:, N], y[:, N]


def train_continuous(L: float, *, tau: float, d: int, N: int, steps: int, batch: int, lr: float, seed: int,
                     test: int, kind: str = "relu_net") -> dict[str, float]:
    """Adam on the reduced model with inputs uniform on the sphere S^{d-1}; returns the learned
    sharpness ||Q||_2, the attention window (attention-weighted distance to the query), the
    effective number of attended tokens 1/sum a_i^2, and the errors of the model and of
    Nadaraya-Watson (leave-one-out bandwidth) on the same unseen prompts."""
    task = make_task(kind, L, d)
    gen = make_generator(seed, f"continuous:L{L:g}")
    model = ReducedAttention(d)  # Q^(0) = 0
    opt = PlainAdam(model.parameters(), lr)  # torch.optim.Adam's numbers
    for _ in range(steps):
        x_ctx, y_ctx, x_q, target = _prompts(task, batch, N, d, tau, gen)
        loss = 0.5 * (model(x_ctx, y_ctx, x_q)[0] - target).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    x_ctx, y_ctx, x_q, target = _prompts(task, test, N, d, tau, make_generator(seed, f"continuous-test:L{L:g}"))
    with torch.no_grad():
        y_hat, attn = model(x_ctx, y_ctx, x_q)
        dist = (x_ctx - x_q.unsqueeze(1)).norm(dim=-1)
        nw = nadaraya_watson(x_ctx, y_ctx, x_q)
    return {
        "L": L,
        "Q_norm": float(torch.linalg.matrix_norm(model.Q.detach(), ord=2)),
        "window": float((attn * dist).sum(-1).mean()),
        "n_eff": float((1.0 / attn.square().sum(-1)).mean()),
        "nn_distance": float(dist.min(-1).values.mean()),
        "error": float(0.5 * (y_hat - target).square().mean()),
        "nadaraya_watson_error": float(0.5 * (nw - target).square().mean()),
    }


def _local_slopes(x: list[float], y: list[float]) -> list[float]:
    """Log-log slopes between successive points (one with two points)."""
    lx, ly = np.log(np.asarray(x, dtype=float)), np.log(np.maximum(np.asarray(y, dtype=float), 1e-300))
    return [float(v) for v in np.diff(ly) / np.diff(lx)]


@experiment("R6", suites=("extensions",), statements=STATEMENTS)
@captioned(CAPTIONS)
@single_threaded
def exp_continuous(ctx: Context) -> list[ClaimResult]:
    d, N, tau = 3, 32, 0.5
    m = d - 1  # the inputs' intrinsic dimension (the sphere S^{d-1})
    predicted = 4 / (m + 2)
    crit = (f"Inputs uniform on the sphere S^{d - 1} (m = {m}), N = {N}, relu_net class, label noise tau = {tau}, "
            "Adam on fresh prompts, L on a grid from 0.5 to 8. Log-log slopes of ||Q||_2 and of the window "
            "(attention-weighted distance to the query) against L, and their local slopes between successive L: "
            "one run per L, so a fit's standard error is a residual of one curve and covers no independent "
            "randomness (reported, not used). Supported if every local slope of ||Q|| is above 0 and every one of "
            "the window below 0 (||Q|| rises and the window shrinks at every step of L); not supported if the "
            "||Q|| slope is below 0.1, the window slope above 0, or some local slope of ||Q|| below 0 or of the "
            "window above 0 by more than 0.1; otherwise inconclusive.")
    S = ctx.sizes
    Ls = grid([0.5, 1.0, 2.0, 4.0, 8.0], S.n_grid)
    rows = []
    for i, L in enumerate(Ls):
        rows.append(train_continuous(L, tau=tau, d=d, N=N, steps=S.continuous_steps, batch=S.batch, lr=0.2,
                                     seed=ctx.seed, test=S.test))
        ctx.tick("R6 continuous", i + 1, len(Ls))
    sq, se_q = loglog_slope(Ls, [r["Q_norm"] for r in rows])
    sw, se_w = loglog_slope(Ls, [r["window"] for r in rows])

    stat = {"L": Ls, "Q_norm": [r["Q_norm"] for r in rows], "window": [r["window"] for r in rows],
            "n_eff": [r["n_eff"] for r in rows], "error": [r["error"] for r in rows],
            "nadaraya_watson_error": [r["nadaraya_watson_error"] for r in rows], "slope_Q": sq, "slope_Q_se": se_q,
            "slope_window": sw, "slope_window_se": se_w, "predicted_slope_Q": predicted}
    local_q, local_w = _local_slopes(Ls, stat["Q_norm"]), _local_slopes(Ls, stat["window"])  # one curve each
    stat.update(local_slopes_Q=local_q, local_slopes_window=local_w)
    sup, ref = r6_rule(sq, sw, local_q, local_w)
    fig, axes = plots.figure(2, 1)
    axes[0][0].loglog(Ls, stat["Q_norm"], "o-", label=f"||Q||_2 (slope {sq:.2f})")
    axes[0][0].loglog(Ls, stat["Q_norm"][0] * (np.array(Ls) / Ls[0]) ** predicted, "k:",
                      label=f"theory slope {predicted:.2f}")
    axes[0][0].loglog(Ls, stat["window"], "s-", label=f"window (slope {sw:.2f})")
    axes[0][0].set(xlabel="L", title="continuous inputs: sharpness and window")
    axes[0][0].legend(fontsize=7)
    axes[0][1].loglog(Ls, stat["error"], "o-", label="trained attention")
    axes[0][1].loglog(Ls, stat["nadaraya_watson_error"], "s--", label="Nadaraya-Watson (LOO h)")
    axes[0][1].set(xlabel="L", ylabel="error on unseen functions", title="error")
    axes[0][1].legend(fontsize=7)
    for ax in axes[0]:
        plain_log_ticks(ax, Ls)
    fig_path = plots.save(fig, ctx.out, "ext_continuous")
    table = write_data(ctx, "R6_per_L", pd.DataFrame([{"L": L, **row} for L, row in zip(Ls, rows, strict=True)]))
    und = "" if sup != ref else "the local slopes are mixed or between the margins: more values of L decide it"
    return [claim("R6", crit, stat, sup, ref, figures=[fig_path], data=[table], undecided_because=und)]




def r6_rule(slope_Q: float, slope_window: float, local_Q: list[float], local_window: list[float]) -> tuple[bool, bool]:
    """R6's (supported, refuted) from the log-log slopes of ||Q||_2 and of the window against L and their local
    slopes: supported if ||Q|| rises and the window shrinks between every two successive L; refuted if the ||Q||
    slope is below 0.1, the window's above 0, or a local slope goes against the claim by more than 0.1."""
    ok = math.isfinite(slope_Q) and math.isfinite(slope_window) and bool(local_Q) and bool(local_window)
    sup = ok and min(local_Q) > 0 and max(local_window) < 0
    ref = ok and (slope_Q < 0.1 or slope_window > 0 or min(local_Q) < -0.1 or max(local_window) > 0.1)
    return sup, ref


R6_LS = [0.5, 1.0, 2.0, 4.0, 8.0]  # the full size's grid of L
R6_CASES = {  # (||Q||_2 of L, window of L): name -> (curves, what they are)
    "null": ((lambda L: 2.0, lambda L: 0.8), "||Q|| and the window the same at every L: the attention does not "
             "sharpen as L grows"),
    "null_widening": ((lambda L: 0.8 * L**0.6, lambda L: 0.9 * L**0.2), "||Q|| rises as L^0.6 but the window "
                      "widens as L^0.2"),
    "planted": ((lambda L: 0.8 * L**0.6, lambda L: 1.2 * L**-0.25), "||Q|| rising as L^0.6 and the window shrinking "
                "as L^-0.25 (the tiny size's slopes)"),
}


@controls("R6")
def r6_controls() -> Controls:
    """R6's rule on synthetic curves ||Q||_2(L) and window(L) over the grid of L."""
    def read(curves, how: str):
        q_of, window_of = curves
        Q, window = [q_of(L) for L in R6_LS], [window_of(L) for L in R6_LS]
        sq, sw = loglog_slope(R6_LS, Q)[0], loglog_slope(R6_LS, window)[0]
        local_q, local_w = _local_slopes(R6_LS, Q), _local_slopes(R6_LS, window)
        return case(*r6_rule(sq, sw, local_q, local_w), {"slope_Q": sq, "slope_window": sw,
                                                         "local_slopes_Q": local_q, "local_slopes_window": local_w},
                    how)

    return controls_from(R6_CASES, read)
