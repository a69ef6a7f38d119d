"""The sweep benchmark's compiled anchor, where JAX is installed (``pip install -e ".[bench]"``): the runs
of ``anchor_vmap`` trained by one ``jax.jit``-compiled loop of ``jax.vmap(jax.value_and_grad(loss))``,
the whole budget in a ``lax.while_loop`` on fixed-shape arrays (a finished run is frozen by a mask, the
loop ends when none is left), in float64, chunks of ``CHUNK`` runs. Nothing leaves the device until a
chunk ends. The same inputs and stopping rules as ``anchor_vmap.train_anchor``, so the toolkit's
sweep agrees with it run for run.
"""

from __future__ import annotations

import jax
import jax.experimental
import jax.numpy as jnp
import numpy as np

from .anchor_vmap import AnchorRun, AnchorSetting, anchor_inputs

CHUNK = 512  # runs compiled and trained together
# float64 inside a context only (the process's JAX default stays float32); older JAX: jax.experimental's
_X64 = jax.enable_x64 if hasattr(jax, "enable_x64") else jax.experimental.enable_x64
STATUS = {1: "converged", 2: "budget", 3: "diverged", 4: "trivial"}  # codes of the loop's status array


def _loss(M, log_c, sigma, p):
    """One run's population loss 1/2 sum_k p_k mean_b (a - e_k)^T Sigma (a - e_k); M (K, K), log c (B, K)."""
    K = M.shape[0]
    a = jax.nn.softmax(log_c[None, :, :] + M[:, None, :], axis=-1)  # (k, b, n)
    err = a - jnp.eye(K, dtype=M.dtype)[:, None, :]
    quad = jnp.einsum("kbn,nm,kbm->kb", err, sigma, err)
    return 0.5 * jnp.sum(p * quad.mean(1))


def _train(log_c, sigma, p, lr, steps: int, eps: float, diverge: float):
    """Every run of a chunk to its end: (status code, steps, T_eps or -1, last finite loss)."""
    R, _, K = log_c.shape
    value_and_grad = jax.vmap(jax.value_and_grad(_loss))

    def body(state):
        step, M, alive, loss_0, last, status, ended_at, t_eps = state
        loss, grad = value_and_grad(M, log_c, sigma, p)
        loss_0 = jnp.where(step == 0, jnp.where(jnp.isfinite(loss), jnp.maximum(loss, 1e-300), jnp.inf), loss_0)
        diverged = alive & (~jnp.isfinite(loss) | (loss > diverge * loss_0))
        converged = alive & ~diverged & (loss <= eps)
        budget = alive & ~diverged & ~converged & (step == steps)
        ended = diverged | converged | budget
        last = jnp.where(alive & ~diverged, loss, last)
        status = jnp.where(diverged, 3, jnp.where(converged, jnp.where(step == 0, 4, 1), jnp.where(budget, 2, status)))
        ended_at = jnp.where(ended, step, ended_at)
        t_eps = jnp.where(converged, step, t_eps)
        alive = alive & ~ended
        M = jnp.where(alive[:, None, None], M - lr[:, None, None] * grad, M)
        return step + 1, M, alive, loss_0, last, status, ended_at, t_eps

    zeros = jnp.zeros(R, dtype=log_c.dtype)
    ints = jnp.zeros(R, dtype=jnp.int32)
    state = (0, jnp.zeros((R, K, K), dtype=log_c.dtype), jnp.ones(R, dtype=bool), zeros, zeros, ints, ints, ints - 1)
    final = jax.lax.while_loop(lambda s: jnp.any(s[2]), body, state)
    return final[5], final[6], final[7], final[4]


_TRAIN = jax.jit(_train, static_argnums=(4, 5, 6))


def train_anchor_jax(runs: list[AnchorRun], s: AnchorSetting) -> list[dict]:
    """The rows of ``anchor_vmap.train_anchor`` (status, steps, T_eps, final_loss), computed by JAX."""
    counts, sigma, p, lr = (t.numpy() for t in anchor_inputs(runs, s))
    rows: list[dict] = []
    with _X64(True):
        for start in range(0, len(runs), CHUNK):
            part = slice(start, start + CHUNK)
            with np.errstate(divide="ignore"):
                log_c = np.log(counts[part])  # -inf where a feature has no token in the context
            status, ended_at, t_eps, last = (np.asarray(x) for x in _TRAIN(
                jnp.asarray(log_c), jnp.asarray(sigma[part]), jnp.asarray(p[part]), jnp.asarray(lr[part]),
                s.steps, s.eps, s.diverge_factor))
            rows += [{"status": STATUS[int(c)], "steps": int(n), "T_eps": None if t < 0 else int(t),
                      "final_loss": float(v)} for c, n, t, v in zip(status, ended_at, t_eps, last, strict=True)]
    return rows
