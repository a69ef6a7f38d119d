"""(b) time per step and peak memory against K, N, d and B, with fitted exponents."""

from __future__ import annotations

from ...api import prepare
from ..common import config, kernel_step, synced
from ..registry import Size, Target, register
from ..timing import fit_exponent, peak_memory_mb, time_interleaved


def _scan(name: str, engine: str, var: str, values: list[int], overrides, size: Size) -> dict:
    """Time per step (fastest of interleaved rounds) and peak memory at each value of ``var``
    (``overrides(value)``: the config of that point), on ``size.device``."""
    steps = []
    for v in values:
        if engine == "kernel":
            steps.append(synced(kernel_step(config(overrides(v), size.device))[0], size.device))
        else:
            cfg = config([*overrides(v), "engine.kind=sampled", "train.optimizer=sgd"], size.device)
            steps.append(synced(prepare(cfg)[1].forward_backward, size.device))
    timings = time_interleaved(steps, rounds=size.pick(7, 5, 2), min_s=size.pick(0.02, 0.005, 0.001))
    points = []
    for v, step, t in zip(values, steps, timings, strict=True):
        points.append({"engine": engine, "scan": name, var: v, "s/step": t.wall_s, "cpu s/step": t.cpu_s,
                       "peak MB": peak_memory_mb(step, size.device)})
    slope = fit_exponent(values, [p["s/step"] for p in points])
    mem_slope = fit_exponent(values, [p["peak MB"] or 0.0 for p in points])
    return {"points": points, "exponent": slope, "memory_exponent": mem_slope, "var": var}


@register("scaling", "(b) time per step and peak memory against K, N, d and B", order=2)
def scaling(size: Size) -> dict:
    Ks = size.pick([4, 8, 16, 32, 64, 128, 256, 512], [4, 16, 64, 256, 512], [4, 8, 16])
    Ns = size.pick([16, 64, 256, 1024, 4096], [16, 64, 256, 1024, 4096], [16, 256])
    ds = size.pick([4, 16, 64, 256, 1024], [4, 16, 64, 256, 1024], [4, 64])
    Bs = size.pick([16, 64, 256, 1024, 4096], [16, 256, 4096], [16, 256])
    bK = size.pick(64, 16, 8)  # draws in the K scan (K^3 B work on the dense path)
    sN = size.pick([16, 64, 256, 1024], [16, 256, 1024], [16, 64])
    sd = size.pick([4, 16, 64, 256], [4, 64, 256], [4, 16])
    scans = [
        _scan("K (dense Sigma)", "kernel", "K", Ks,
              lambda K: ["features.kind=gaussian", f"features.K={K}", "features.d=64", f"engine.draws={bK}"], size),
        _scan("K (diagonal Sigma)", "kernel", "K", Ks,
              lambda K: [f"features.K={K}", f"features.d={max(Ks)}", f"engine.draws={bK}"], size),
        _scan("N", "kernel", "N", Ns,
              lambda N: ["features.kind=gaussian", "features.K=8", "features.d=64", f"prompt.N={N}"], size),
        _scan("d", "kernel", "d", ds, lambda d: ["features.kind=gaussian", "features.K=4", f"features.d={d}"], size),
        _scan("B (draws)", "kernel", "B", Bs,
              lambda B: ["features.kind=gaussian", "features.K=8", "features.d=64", f"engine.draws={B}"], size),
        _scan("N", "sampled", "N", sN,
              lambda N: ["features.K=4", "features.d=16", f"prompt.N={N}", "engine.batch=64"], size),
        _scan("d", "sampled", "d", sd,
              lambda d: ["features.K=4", f"features.d={d}", "prompt.N=64", "engine.batch=64"], size),
    ]
    rows = [p for sc in scans for p in sc["points"]]
    exponents = [
        {"engine": sc["points"][0]["engine"], "scan": sc["points"][0]["scan"], "time exponent": sc["exponent"],
         "memory exponent": sc["memory_exponent"]}
        for sc in scans
    ]
    by = {(e["engine"], e["scan"]): e["time exponent"] for e in exponents}
    targets = [
        Target("(b) kernel step time exponent in d", by[("kernel", "d")], "<=", 0.1).as_dict(),
        Target("(b) kernel step time exponent in N", by[("kernel", "N")], "<=", 0.1).as_dict(),
    ]
    notes = [
        "kernel: one bare step (loss, attention, gradient, update); sampled: one forward/backward of fresh prompts; "
        "each time is the fastest of several rounds that visit all points of a scan in turn.",
        "peak MB: resident memory added during one step (Linux VmHWM), 0 when the step reuses memory already held; "
        "on cuda: the device memory torch allocated at its peak during the step, above what it held before.",
        f"K scan with B = {bK} draws; the other kernel scans at K = 8 (d scan: K = 4) and B = 256.",
    ]
    return {"rows": rows, "exponents": exponents, "targets": targets, "notes": notes}
