"""``reproduce comparisons``: the trained softmax attention model beside the baselines of
``lipschitz-icl evaluate``, error against the number of context examples up to 4N (past the
training N: length generalisation). A comparison, not a claim of the paper: no criterion and no
verdict; the report shows it in its own section after the claims, and its numbers are a CSV."""

from __future__ import annotations

from ... import plots
from ...evaluate import EVALUATION_CSV, LINEAR, MODEL, default_contexts, evaluate_run, write_evaluation
from ...experiments.claims import ClaimResult, comparison
from ...experiments.registry import experiment
from ...experiments.runner import Context, paper_base, rel_runs, run_group, single_threaded, with_overrides
from ...plots.evaluate import draw_evaluation

C1_STATEMENT = ("Comparison with baselines (not a claim): the trained softmax attention model's error on unseen "
                "functions against the number of context examples, from 1 to 4N (beyond the training N: length "
                "generalisation), beside the Bayes-optimal GP on the features (Sigma), linear attention trained "
                "by GD, 1-NN, 3-NN, Nadaraya-Watson, least squares, a GP on the tokens and the context mean.")
N_TRAIN = 16  # context examples in training: 4N = 64 keeps the n x n baselines fast
TASK = "relu_net"  # trained on a nonlinear class; evaluated on it and on a held-out class (linear)
DATA_DIR = "comparisons/baselines"  # under the output directory: evaluation.csv and evaluation.parquet
STEM = "comparison_baselines"


@experiment("C1", suites=("comparisons",), statements={"C1": C1_STATEMENT}, comparison=True)
@single_threaded
def exp_baselines(ctx: Context) -> list[ClaimResult]:
    """Train the reduced softmax attention model at N_TRAIN on TASK (kernel engine, GD, relative eps
    1e-3), then evaluate it and every baseline on the same fresh prompts (evaluate.evaluate_run)."""
    cfg = with_overrides(paper_base(ctx), [f"prompt.N={N_TRAIN}", f"task.kind={TASK}", "train.eps_mode=relative",
                                           "train.eps=1e-3", f"name=softmax-{TASK}-N{N_TRAIN}"])
    (run,) = run_group(ctx, "comparison-baselines", [cfg], "C1 baselines")
    contexts = default_contexts(N_TRAIN)
    table = evaluate_run(run, prompts=max(ctx.sizes.test, 16), contexts=contexts,
                         progress=lambda done, total: ctx.tick("C1 evaluation", done, total))
    write_evaluation(table, ctx.out / DATA_DIR)
    warnings = list(table.attrs.get("warnings", []))
    fig = plots.save(draw_evaluation(table, "C1:"), ctx.out, STEM)
    stat = {"training": {"class": TASK, "N": N_TRAIN, "L": cfg.task.L, "status": run.summary["status"],
                         "steps": run.summary["steps"]},
            "data": f"{DATA_DIR}/{EVALUATION_CSV}", "prompts": int(max(ctx.sizes.test, 16)),
            **_headline(table, N_TRAIN), "warnings": warnings}
    caption = ("Error 1/2 E[(y_hat - f(x_q))^2] on unseen functions against the number of context examples n "
               f"(log-log, +-1 standard error over prompts), one panel per class: {TASK} (trained) and the held-out "
               "one. Black: "
               f"the attention model at its trained Q; dashed: the Bayes predictor with the class's Sigma (a lower "
               f"reference, it knows the feature ids); grey band: n beyond the training N = {N_TRAIN}. Look for the "
               "black curve's distance to the Bayes curve and whether it keeps falling past N (length "
               "generalisation) or flattens or rises there. Errors below the dotted floor are exact fits "
               "(see the warnings): a baseline on that floor is trivially exact, not a better learner.")
    return [comparison("C1", stat, figures=[fig], captions={fig: caption}, runs=rel_runs(ctx, [run]),
                       notes=" ".join(f"Warning: {w}." for w in warnings))]


def _headline(table, N: int) -> dict:  # noqa: N803 - the paper's symbol
    """Per class: every method's error at N and at 4N, the model's rank among the methods at N, and the
    model's error at 4N relative to N (below 1: it still improves past the training length)."""
    out: dict = {"error_at_N": {}, "error_at_4N": {}, "model_rank_at_N": {}, "model_4N_over_N": {}}
    for cls, sub in table.groupby("class", sort=False):
        at = {n: dict(zip(rows.method, rows.error, strict=True))
              for n, rows in sub[sub.n_context.isin([N, 4 * N])].groupby("n_context")}
        out["error_at_N"][cls] = at[N]
        out["error_at_4N"][cls] = at[4 * N]
        ranked = sorted(at[N], key=at[N].get)
        out["model_rank_at_N"][cls] = f"{ranked.index(MODEL) + 1} of {len(ranked)}"
        out["model_4N_over_N"][cls] = at[4 * N][MODEL] / at[N][MODEL] if at[N][MODEL] > 0 else None
        out.setdefault("model_over_linear_attention_at_N", {})[cls] = (at[N][MODEL] / at[N][LINEAR]
                                                                       if at[N][LINEAR] > 0 else None)
    return out
