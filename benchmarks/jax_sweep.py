"""A quickstart L x eta sweep in JAX: the runs of ``lipschitz-icl sweep run``, end to end, into one parquet file.

The runs (kernel engine, reduced model, linear class, orthonormal features, gd in S space) are trained by
``jax.vmap`` over runs of the closed-form loss and gradient, one ``jax.jit``-compiled ``lax.while_loop`` per chunk
of runs, in float64. Not imported by the package or its tests: a benchmark to time against the toolkit's sweep.

It mirrors this spec (the grid is cartesian, L outermost, seeds innermost: seed = base seed + 0..S-1):

    base: configs/quickstart.yaml
    overrides: [engine.draws=32, train.steps=300, train.eps=1e-3]
    grid: {task.L: logspace(-0.5, 1, 10), train.lr: logspace(-0.5, 1.5, 10)}
    seeds: S

    python benchmarks/jax_sweep.py --seeds 20 --out /tmp/jax2k.parquet   # 2,000 runs

Inputs: each run's arrays (its multinomial count draws from the seed's ``counts`` stream, Sigma, p, M^(0)) come
from the toolkit's own preparation, ``kernel_spec(build_problem(cfg))``, once per (L, seed) (eta only enters
the loop); that time (and importing torch and the toolkit) is part of this script's wall time. Everything after
it (training, stopping rules, writing) is JAX, NumPy and pyarrow.

Per step t, as the toolkit's trainer (``stopping.RunState.observe``): the loss and Attn_k at M_t, before its
update; the run ends as ``diverged`` (loss not finite or above diverge_factor x the initial loss), ``converged``
(loss <= eps; ``trivial`` at t = 0) or ``budget`` (t = train.steps); otherwise M <- M - eta dL/dM. ``steps`` is
the step it ended at (= updates made); T_eps, T_1 (first step with min_k Attn_k >= analysis.t1_level) are steps.
The loss is the toolkit's diagonal-Sigma closed form (``engines.kernel_diag``); where P = softmax(M) underflows
(a non-finite loss), the chunk's step is recomputed in log space, as ``kernel_grad.kernel_loss_grad`` does.
Not computed: test errors, T_half, T_rel, metrics curves, parameters.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from pathlib import Path

# measured on this CPU (jaxlib 0.10.2): ~20% faster steps and ~0.3 s less compile time; XLA_FLAGS set by the caller wins
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=false")

import jax
import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

jax.config.update("jax_enable_x64", True)

STATUS = np.array(["budget", "diverged", "converged", "trivial"])  # codes 0..3, as stopping_batch.STATUSES
BASE = str(Path(__file__).resolve().parents[1] / "configs" / "quickstart.yaml")
OVERRIDES = ["engine.draws=32", "train.steps=300", "train.eps=1e-3"]


def loss_grad_diag(M, c, s, p):
    """One run: loss, Attn_k (K,), dL/dM (K, K) for scores M (K, K), counts c (K, B), Sigma = diag(s), p (K,)."""
    B = c.shape[1]
    P = jax.nn.softmax(M, axis=-1)
    Pkk = jnp.diag(P)
    P_off = P - jnp.diag(Pkk)
    c2 = c * c
    Z_off = P_off @ c  # (k, b): sum_{n != k} c_nb P_kn
    inv_Z = 1.0 / (c * Pkk[:, None] + Z_off)
    inv_Z2 = inv_Z * inv_Z
    e = Z_off * inv_Z  # 1 - a_kk
    off = ((P_off * P_off * s[None, :]) @ c2) * inv_Z2  # sum_{n != k} s_n a_n^2
    quad = e * e * s[:, None] + off
    loss = 0.5 * jnp.sum(p * quad.mean(-1))
    w = c * inv_Z
    attn = Pkk * w.sum(-1) / B
    we = w * e
    ag = off - we * (s * Pkk)[:, None]  # <a, g>, g = Sigma (a - e_k)
    T = c @ (ag * inv_Z).T  # (n, k)
    S2 = c2 @ inv_Z2.T
    grad = P * P * S2.T * s[None, :]
    grad = grad.at[jnp.diag_indices(M.shape[0])].set(-s * Pkk * we.sum(-1))
    return loss, attn, (grad - P * T.T) * (p / B)[:, None]


def loss_exact(M, c, s, p):
    """The same loss (and Attn_k) from a = softmax_n(log c_n + M_kn): finite where P underflows."""
    K = M.shape[0]
    a = jax.nn.softmax(jnp.log(c.T)[None, :, :] + M[:, None, :], axis=-1)  # (k, b, n)
    err = a - jnp.eye(K)[:, None, :]
    loss = 0.5 * jnp.sum(p * jnp.einsum("kbn,n,kbn->kb", err, s, err).mean(1))
    return loss, jnp.diagonal(a.mean(1))


def step_exact(M, c, s, p):
    (loss, attn), grad = jax.value_and_grad(loss_exact, has_aux=True)(M, c, s, p)
    return loss, attn, grad


@functools.partial(jax.jit, static_argnames="safe")
def train_chunk(c, s, p, M0, lr, budget, eps, relative, diverge, t1_level, safe=False):
    """Every run of a chunk to its end (fixed shapes; an ended run is frozen by a mask). With ``safe=False`` the
    loop stops at the first non-finite loss of a live run, returning ``hit``: the caller reruns the chunk safe."""
    R, K = s.shape
    fast, exact = jax.vmap(loss_grad_diag), jax.vmap(step_exact)

    def body(st):
        t, M, alive, hit, loss_0, last, attn_last, status, steps, t_eps, t_1 = st
        loss, attn, grad = fast(M, c, s, p)
        bad = ~jnp.isfinite(loss) & alive
        if safe:  # recompute the step in log space where P underflowed (kernel_grad.kernel_loss_grad's rule)
            loss, attn, grad = jax.lax.cond(bad.any(), lambda: jax.tree.map(
                lambda x, y: jnp.where(bad.reshape((-1,) + (1,) * (x.ndim - 1)), y, x),
                (loss, attn, grad), exact(M, c, s, p)), lambda: (loss, attn, grad))
        else:
            hit = bad.any()
        loss_0 = jnp.where(t == 0, jnp.where(jnp.isfinite(loss), jnp.maximum(loss, 1e-300), jnp.inf), loss_0)
        diverged = alive & (~jnp.isfinite(loss) | (loss > diverge * loss_0))
        live = alive & ~diverged
        t_1 = jnp.where(live & (t_1 < 0) & (attn.min(-1) >= t1_level), t, t_1)
        done = live & (loss <= jnp.where(relative, eps * loss_0, eps))
        last, attn_last = jnp.where(live, loss, last), jnp.where(live[:, None], attn, attn_last)
        status = jnp.where(diverged, 1, jnp.where(done, jnp.where(t == 0, 3, 2), status))
        t_eps = jnp.where(done, t, t_eps)
        ended = diverged | done | (live & (t == budget))
        steps, alive = jnp.where(ended, t, steps), alive & ~ended
        M = jnp.where(alive[:, None, None], M - lr[:, None, None] * grad, M)
        return t + 1, M, alive, hit, loss_0, last, attn_last, status, steps, t_eps, t_1

    nan, ints = jnp.full(R, jnp.nan), jnp.zeros(R, dtype=jnp.int32)
    init = (0, M0, jnp.ones(R, dtype=bool), False, nan, nan, jnp.full((R, K), jnp.nan), ints, ints, ints - 1, ints - 1)
    final = jax.lax.while_loop(lambda st: st[2].any() & ~st[3], body, init)
    return final[3], *final[5:]  # hit; last loss, Attn_k, status, steps, T_eps, T_1


def prepare(args):
    """The grid's points (L, lr, seed), their configs' shared values, and each point's arrays (toolkit code)."""
    import lipschitz_icl as li  # torch and the toolkit: timed with the rest
    from lipschitz_icl.engines.kernel_spec import kernel_spec
    from lipschitz_icl.problem import build_problem
    from lipschitz_icl.sweep.spec import parse_range

    base = li.load_config(args.base, OVERRIDES + args.set)
    Ls, lrs, seeds = parse_range(args.L), parse_range(args.lr), [base.seed + i for i in range(args.seeds)]
    arrays = {}  # (L, seed) -> (counts (K, B), diag(Sigma), p, M0): eta does not change them
    for L in Ls:
        for seed in seeds:
            cfg = base.model_copy(update={"seed": seed, "task": base.task.model_copy(update={"L": L})})
            spec = kernel_spec(build_problem(cfg))
            sigma = spec.sigma.numpy()
            if (base.train.optimizer != "gd" or spec.space != "S" or spec.gram is not None or spec.resample
                    or spec.tau or spec.linear or spec.weights is not None
                    or not np.array_equal(np.diag(np.diag(sigma)), sigma)):
                raise SystemExit("needs the quickstart's setting: reduced model, gd in S space, drawn or mean-field "
                                 "counts, G = V^T V = I, a diagonal Sigma, no label noise")
            arrays[L, seed] = (spec.counts.T.numpy(), np.diag(sigma), spec.p.numpy(), spec.M0.numpy())
    points = [(L, lr, seed) for L in Ls for lr in lrs for seed in seeds]
    return points, base.train, base.analysis.t1_level, arrays


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawTextHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--seeds", "--spec-seeds", type=int, default=2, help="seeds per grid point (default 2: 200 runs)")
    ap.add_argument("--out", default="jax_sweep.parquet", help="the parquet file to write")
    ap.add_argument("--base", default=BASE, help="base config (default: the repository's configs/quickstart.yaml)")
    ap.add_argument("--set", nargs="*", default=[], help=f"more key=value overrides (after {' '.join(OVERRIDES)})")
    ap.add_argument("--L", default="logspace(-0.5, 1, 10)", help="task.L axis (default %(default)s)")
    ap.add_argument("--lr", default="logspace(-0.5, 1.5, 10)", help="train.lr axis (default %(default)s)")
    ap.add_argument("--chunk", type=int, default=500, help="runs per compiled chunk (default 500)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    points, tc, t1_level, arrays = prepare(args)
    R, t_prep = len(points), time.perf_counter() - t0
    c, s, p, M0 = (np.stack([arrays[L, seed][i] for L, _, seed in points]) for i in range(4))
    lr = np.array([pt[1] for pt in points])
    size = min(args.chunk, R)
    pad = -R % size  # the last chunk padded with copies of the last run: one compiled shape
    c, s, p, M0, lr = (np.concatenate([x, np.repeat(x[-1:], pad, 0)]) for x in (c, s, p, M0, lr))
    scalars = (tc.steps, tc.eps, tc.eps_mode == "relative", tc.diverge_factor, t1_level)
    outs = []
    for start in range(0, R + pad, size):
        part = slice(start, start + size)
        chunk = (c[part], s[part], p[part], M0[part], lr[part], *scalars)
        hit, *out = jax.device_get(train_chunk(*chunk))
        outs.append(jax.device_get(train_chunk(*chunk, safe=True))[1:] if hit else out)
    last, attn, status, steps, t_eps, t_1 = (np.concatenate(x)[:R] for x in zip(*outs, strict=True))
    t_train = time.perf_counter() - t0 - t_prep
    L, lrs, seed = (np.array(col) for col in zip(*points, strict=True))
    cols = {"task.L": L, "train.lr": lrs, "seed": seed.astype(np.int32),
            "status": pa.DictionaryArray.from_arrays(status.astype(np.int8), STATUS),
            "steps": steps.astype(np.int32), "T_eps": pa.array(t_eps, mask=t_eps < 0, type=pa.int32()),
            "T_1": pa.array(t_1, mask=t_1 < 0, type=pa.int32()), "final_loss": last, "min_attn": attn.min(1),
            **{f"attn_self_{k}": attn[:, k] for k in range(attn.shape[1])}}
    table = pa.table(cols)
    pq.write_table(table, args.out)
    counts = dict(zip(*np.unique(STATUS[status], return_counts=True), strict=True))
    print(f"{R} runs ({', '.join(f'{n} {k}' for k, n in counts.items())}) in {time.perf_counter() - t0:.2f} s "
          f"(inputs {t_prep:.2f} s, training {t_train:.2f} s); {args.out}: {os.path.getsize(args.out) / R:.0f} B/run "
          f"on disk, {table.nbytes / R:.0f} B/run in memory")


if __name__ == "__main__":
    main()
