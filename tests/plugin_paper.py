"""A user's paper in one file (docs/EXTENDING.md, "A paper", shows the same layout): it registers its
paper, then one claim with its statement, criterion and experiment. Loaded with
``lipschitz-icl reproduce --plugins plugin_paper``; its package is found by the paper's id."""

from lipschitz_icl.experiments import Paper, claim, experiment, paper_base, register_paper, rel_runs, run_group

PAPER = register_paper(Paper(id="plugin_paper", title="A toy paper on attention", authors="A. Researcher",
                             year=2026, venue="a test", reachable="all of it", claims=("U1",)))


@experiment("U1", suites=("toy_paper",), statements={"U1": "Trained to a relative eps of 1e-2, every query attends "
                                                           "to its own feature: min_k Attn_k >= 0.9 at L = 1 and 3."})
def exp_toy_attention(ctx):
    criterion = "Supported if both runs end with min_k Attn_k >= 0.9; not supported if either ends below 0.8."
    configs = [paper_base(ctx, f"task.L={L}", "train.eps_mode=relative", "train.eps=1e-2", "train.steps=3000",
                          f"name=L{L}") for L in (1, 3)]
    runs = run_group(ctx, "toy-attention", configs)
    attn = [r.summary["min_attn"] for r in runs]
    return [claim("U1", criterion, {"min_attn": attn}, min(attn) >= 0.9, min(attn) < 0.8, runs=rel_runs(ctx, runs))]
