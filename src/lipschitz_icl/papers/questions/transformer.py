"""questions/transformer.py"""

from __future__ import annotations

import math

from ... import plots
from ...experiments.claims import ClaimResult, claim
from ...experiments.controls import Controls, case, controls, controls_from
from ...experiments.figures import captioned
from ...experiments.measure import tail_mean
from ...experiments.registry import experiment
from ...experiments.runner import (
    Context,
    rel_runs,
    run_group,
    sampled_base,
    single_threaded,
    with_overrides,
)

STATEMENTS = {  # the claims this file tests, word for word as the report and docs/CLAIMS.md give them
    "R7": "Deeper and multi-head transformers (R7): in a 2-layer, 4-head transformer trained on the same task, some "
    "head reproduces the paper's mechanism, Attn_k -> 1 for every k.",
}


CAPTIONS = {  # figure stem -> what is plotted, what to look for, what would contradict the claim
    "ext_transformer": (
        "2-layer, 4-head transformer: left, min_k Attn_k of each layer (L) and head (H) against step (thick: the best "
        "head; black dashed: the reduced model); right, error on unseen functions of both models (log y). Look for "
        "some head rising toward 1 as the reduced model does. Every head staying below 1/2 while the transformer "
        "still learns (error within 2x of the reduced model's) contradicts R7: it would use another mechanism."),
}


@experiment("R7", suites=("extensions",), statements=STATEMENTS)
@captioned(CAPTIONS)
@single_threaded
def exp_transformer(ctx: Context) -> list[ClaimResult]:
    crit = ("K = d = 4, N = 16, linear L = 2; a transformer on [x, y] tokens (2 layers, 4 heads, width 16, MLP, "
            "LayerNorm, float32) and the reduced model, Adam on fresh prompts for the same steps. Statistic: for each "
            "layer and head, min_k Attn_k averaged over the last 20% of the recorded steps; the best head. "
            "Supported if the best head >= 0.9; not supported if the best head < 0.5 while the transformer's "
            "test error is within 2 x the reduced model's (it solved the task another way); otherwise inconclusive.")
    S = ctx.sizes
    cfg = sampled_base(ctx, "train.optimizer=adam", "engine.resample=true", "train.eps=1e-9",
                       f"train.steps={S.transformer_steps}")
    configs = [
        with_overrides(cfg, ["model.kind=transformer", "model.n_layers=2", "model.n_heads=4", "model.width=16",
                             "model.mlp=true", "model.layernorm=true", "engine.dtype=float32", "train.lr=0.01",
                             "name=transformer"]),
        with_overrides(cfg, ["train.lr=0.05", "name=reduced"]),
    ]
    runs = run_group(ctx, "ext-transformer", configs, "R7 transformer")
    tr, red = runs
    heads = {m.split("@")[1]: tail_mean(tr.series(m)) for m in sorted(set(tr.metrics.metric))
             if m.startswith("attn_min@")}
    best = best_head(heads)
    err_t, err_r = tail_mean(tr.series("test_error")), tail_mean(red.series("test_error"))
    stat = {"head_attn_min_tail": heads, "best_head": best, "best_head_attn_min": heads[best],
            "transformer_test_error": err_t, "reduced_test_error": err_r,
            "reduced_attn_min_tail": tail_mean(red.series("attn_min"))}
    sup, ref = r7_rule(heads[best], err_t, err_r)
    fig, axes = plots.figure(2, 1)
    cols = plots.colors(len(heads))
    for (h, _), c in zip(heads.items(), cols, strict=True):
        s = tr.series(f"attn_min@{h}")
        axes[0][0].plot(s.index, s.values, color=c, lw=2 if h == best else 0.8, label=h)
    s = red.series("attn_min")
    axes[0][0].plot(s.index, s.values, "k--", label="reduced")
    axes[0][0].set(xlabel="step", ylabel="min_k Attn_k", title="per layer (L) and head (H)")
    axes[0][0].legend(fontsize=6, ncol=2)
    for r, name in ((tr, "transformer"), (red, "reduced")):
        te = r.series("test_error")
        axes[0][1].semilogy(te.index, te.values, label=name)
    axes[0][1].set(xlabel="step", ylabel="test error", title="unseen-function error")
    axes[0][1].legend(fontsize=7)
    fig_path = plots.save(fig, ctx.out, "ext_transformer")
    undecided = ""
    if sup == ref:  # inconclusive: say which band the measurement fell in
        undecided = (f"the best head's min_k Attn_k ({heads[best]:.3g}) lies between 0.5 and 0.9"
                     if 0.5 <= heads[best] < 0.9 else
                     f"the best head stays below 0.5 but the transformer's error ({err_t:.3g}) is over 2x the "
                     f"reduced model's ({err_r:.3g})")
        undecided += "; longer training (the heads' attention still moving at the end) or more seeds would decide"
    return [claim("R7", crit, stat, sup, ref, figures=[fig_path], runs=rel_runs(ctx, runs),
                  undecided_because=undecided)]




def best_head(heads: dict[str, float]) -> str:
    """The layer and head with the largest min_k Attn_k (a non-finite value counts as -1)."""
    return max(heads, key=lambda h: heads[h] if math.isfinite(heads[h]) else -1.0)


def r7_rule(best_head_attn_min: float, transformer_error: float, reduced_error: float) -> tuple[bool, bool]:
    """R7's (supported, refuted): supported if the best head's min_k Attn_k >= 0.9; refuted if it is below 1/2
    while the transformer's test error is within 2x the reduced model's (it learned the task another way)."""
    return best_head_attn_min >= 0.9, best_head_attn_min < 0.5 and transformer_error <= 2 * reduced_error


def _heads(values: list[float]) -> dict[str, float]:
    return {f"L{i // 4}H{i % 4}": v for i, v in enumerate(values)}


R7_CASES = {  # (min_k Attn_k of each of the 8 heads, transformer error, reduced error): name -> (data, what it is)
    "null": ((_heads([0.01, 0.12, 0.04, 0.03, 0.19, 0.14, 0.22, 0.2]), 0.05, 0.04), "every head's min_k Attn_k "
             "0.01-0.22 (as at the tiny size) while the transformer's error is 1.25x the reduced model's: it solved "
             "the task with another mechanism"),
    "planted": ((_heads([0.02, 0.1, 0.05, 0.03, 0.2, 0.95, 0.3, 0.2]), 0.05, 0.04), "one second-layer head at "
                "min_k Attn_k 0.95, the transformer's error 1.25x the reduced model's"),
}


@controls("R7")
def r7_controls() -> Controls:
    """R7's rule on synthetic per-head attention and errors of the transformer and the reduced model."""
    def read(data: tuple[dict[str, float], float, float], how: str):
        heads, err_t, err_r = data
        best = best_head(heads)
        return case(*r7_rule(heads[best], err_t, err_r), {"best_head": best, "best_head_attn_min": heads[best],
                                                          "error_over_reduced": err_t / err_r}, how)

    return controls_from(R7_CASES, read)
