"""(a) time per gradient step at matched standard error, and (e) the sampled engine's overhead."""

from __future__ import annotations

import math

import torch

from ...api import prepare
from ..common import config, kernel_draw_losses, kernel_step, q_from_scores, run_step_time
from ..plain_pytorch import PlainBaseline
from ..registry import Size, Target, register
from ..timing import time_call


def _setting(size: Size) -> tuple[int, int, int, int]:
    return size.pick((8, 64, 256, 4096), (8, 64, 256, 4096), (4, 16, 32, 256))  # K, d, N, B


def _spreads(base: PlainBaseline, V: torch.Tensor, base_ov: list[str], size: Size) -> list[tuple[str, float, float]]:
    """Standard deviation of one sample of the loss, per prompt (baseline) and per count draw
    (kernel engine), at Q = 0 and at a point the kernel engine reached by training."""
    step, batch = kernel_step(config([*base_ov, "engine.draws=1024"]))
    M_points = [batch.M[0].clone()]
    for _ in range(size.pick(200, 100, 20)):
        step()
    M_points.append(batch.M[0].clone())
    rows = []
    for label, M in zip(("Q = 0", "trained"), M_points, strict=True):
        with torch.no_grad():
            base.Q.copy_(q_from_scores(V, M).to(base.Q.dtype))
            sd_s = float(base.prompt_losses().double().std())
        sd_k = float(kernel_draw_losses(config([*base_ov, "engine.draws=1024"]), M).std())
        rows.append((label, sd_s, sd_k))
    return rows


def _matched_draws(spreads: list[tuple[str, float, float]], B: int) -> int:
    """The smallest power of two (>= 64) of count draws whose standard error is at most that of B prompts."""
    ratio_needed = max([(sd_k / sd_s) ** 2 if sd_s > 0 else 1.0 for _, sd_s, sd_k in spreads] + [0.0])
    return max(64, 2 ** math.ceil(math.log2(max(1.0, B * ratio_needed))))


def _one_setting(kind: str, size: Size) -> dict:
    """The baseline, the kernel engine at matched standard error and the sampled engine, one feature kind."""
    K, d, N, B = _setting(size)
    base_ov = [f"features.kind={kind}", f"features.K={K}", f"features.d={d}", f"prompt.N={N}", "task.L=2",
               f"engine.device={size.device}"]
    problem, _, _ = prepare(config(base_ov))
    V = problem.features.V
    base = PlainBaseline(V, N, B, L=2.0, lr=1.0, seed=1, device=size.device)  # float32, B prompts per step
    t_base = time_call(base.step, repeats=size.pick(5, 3, 2), warmup=1, budget_s=size.pick(30, 8, 2))
    spreads = _spreads(base, V, base_ov, size)
    draws = _matched_draws(spreads, B)
    run_step_time(config([*base_ov, f"engine.draws={draws}", "train.steps=20"]))  # warm-up
    t_kernel, _ = run_step_time(config([*base_ov, f"engine.draws={draws}", "train.eps=1e-12",
                                        f"train.steps={size.pick(3000, 1000, 50)}"]))
    se_ratio = max((sd_k / math.sqrt(draws)) / (sd_s / math.sqrt(B)) for _, sd_s, sd_k in spreads if sd_s > 0)
    # the sampled engine, recorder on, same size and dtype as the baseline
    t_sampled, _ = run_step_time(config([*base_ov, "engine.kind=sampled", "train.optimizer=sgd",
                                         f"engine.batch={B}", "engine.dtype=float32",
                                         f"train.steps={size.pick(8, 4, 2)}", "train.log_every=10",
                                         "train.eps=1e-12", "train.lr=1.0"]))
    return {
        "features": kind, "K": K, "d": d, "N": N, "B (prompts)": B,
        "baseline s/step": t_base.wall_s, "baseline cpu s/step": t_base.cpu_s,
        "sampled engine s/step": t_sampled, "kernel draws": draws, "kernel s/step": t_kernel,
        "kernel speedup": t_base.wall_s / t_kernel, "SE kernel / SE baseline": se_ratio,
        "sampled / baseline": t_sampled / t_base.wall_s,
        "sd per prompt (Q=0, trained)": [s for _, s, _ in spreads],
        "sd per draw (Q=0, trained)": [k for _, _, k in spreads],
    }


def _targets(row: dict, size: Size) -> list[dict]:
    speedup = row["kernel speedup"]
    why = "the baseline is smaller than the target's size (--tiny)" if size.tiny and speedup < 1000 else ""
    return [
        Target(f"(a) kernel vs plain PyTorch, K={row['K']} d={row['d']} N={row['N']} B={row['B (prompts)']}",
               speedup, ">=", 1000, "x", why).as_dict(),
        Target("(a) SE of kernel estimate / SE of baseline", row["SE kernel / SE baseline"], "<=", 1.0).as_dict(),
        Target("(e) sampled engine (recorder on) / plain baseline", row["sampled / baseline"], "<=", 1.5,
               "x").as_dict(),
    ]


NOTES = [
    "baseline: plain PyTorch in float32 (torch's default); kernel engine in float64 (its default); "
    "sampled engine in float32 to match the baseline. One thread each unless --threads says otherwise.",
    "kernel draws: the smallest power of two (>= 64) whose standard error of the loss is at most the "
    "baseline's at B prompts, at Q = 0 and at a trained point.",
    "orthonormal features + linear class give a diagonal Sigma (the O(K^2 B) path); gaussian features "
    "give a dense Sigma (the (n, k, b) tensor path).",
]


@register("step_time", "(a) time per gradient step at matched standard error; (e) sampled engine overhead", order=1)
def step_time(size: Size) -> dict:
    rows = [_one_setting(kind, size) for kind in ("orthonormal", "gaussian")]
    return {"rows": rows, "targets": _targets(rows[0], size), "notes": list(NOTES)}
