"""(f) gaussian features and nonlinear classes; (g) error on unseen functions per class."""

from __future__ import annotations

import math

import numpy as np

from ... import plots
from ...experiments.claims import ClaimResult, claim
from ...experiments.controls import Controls, case, controls, controls_from
from ...experiments.evidence import REFINE_DRAWS, refined_conditions, refined_context, run_settings
from ...experiments.figures import captioned
from ...experiments.measure import L_star_of
from ...experiments.registry import experiment
from ...experiments.runner import Context, paper_base, rel_runs, run_group, with_budget, with_overrides
from ...experiments.synthetic import share_controls
from ...phases import read_run_phases

STATEMENTS = {  # the claims this file tests, word for word as the report and docs/CLAIMS.md give them
    "P8": "All of this holds beyond orthonormal features and beyond linear functions: for general non-degenerate "
    "L-Lipschitz functions.",
    "P3": "At convergence every query attends to its own feature (Attn_k -> 1 for all k) and the prediction error "
    "on functions never seen in training is below eps.",
}


CAPTIONS = {  # figure stem -> what is plotted, what to look for, what would contradict the claim
    "beyond_linear": (
        "Left: min_k Attn_k against step for each class (colour) with orthonormal (solid) and gaussian (dashed) "
        "features, at L*/2 (thin) and 2 L* (thick); middle: loss over its initial value; right: each run's error on "
        "unseen functions over eps (dotted: 1). P8: look for the same fast rise then slow creep, and convergence, in "
        "every class and feature kind; attention stalling well below 1 or a loss that plateaus contradicts it. P3: "
        "look for bars at or left of the dotted line (the criterion allows 1.5 eps); bars far right of it for runs "
        "that converged contradict it."),
}


CLASSES = ("linear", "relu_net", "rbf", "sinusoid", "aniso_linear")  # aniso_linear: not rotation-invariant
P8_EPS = 1e-3  # relative eps of P8's and P3's runs (P3 asks min_k Attn_k >= 0.9 at it)


@experiment("P8", "P3", suites=("paper",), statements=STATEMENTS)
@captioned(CAPTIONS)
def exp_beyond(ctx: Context) -> list[ClaimResult]:
    """(f) gaussian features and nonlinear classes; (g) error on unseen functions per class."""
    crit8 = ("For orthonormal and gaussian features and the classes linear, relu_net, rbf, sinusoid and "
             "aniso_linear (a law that is not rotation-invariant), each at L = 0.5 L* and 2 L* of that setting, "
             "trained to a relative eps with a budget of 3x the theory's time scale K log(K/eps) / (eta delta^2 L^2 "
             "Delta^2) of the setting: a run passes if the phase reading (phases.py: T_1 >= 10 steps, a rise that "
             "does not decelerate by more than 1.5x before T_1, then a rate of -log(1 - min_k Attn_k) over [5 T_1, "
             "10 T_1] below 1/3 of the fast one) finds two phases and the run converges (loss <= eps); a converged "
             "run it cannot read counts as censored. Runs are grouped by fingerprint (on orthonormal features every "
             "rotation-invariant class is the "
             "linear one, and the two L of a setting are one trajectory); the share is over the distinct settings "
             "other than that of (orthonormal, linear). Supported if >= 80% of them pass counting censored runs "
             "(budget spent) as failing; not supported if <= 40% pass counting them as passing; otherwise "
             "inconclusive.")
    crit3 = ("Among the distinct settings (grouped by fingerprint, one run each) that reached loss <= eps: final "
             "min_k Attn_k >= 1 - eps_attn (0.9) and error on fresh functions of the same class <= 1.5 eps. "
             "Supported if >= 90% of them satisfy both; not supported if < 50%. Both P8 and P3 stand only if "
             f"the same runs at {REFINE_DRAWS}x the count draws give the same verdict.")
    runs, rows, settings = _beyond_runs(ctx)
    fine_ctx, what = refined_context(ctx)
    _, fine_rows, fine_settings = _beyond_runs(fine_ctx)
    fig = _beyond_figure(ctx, runs, rows)
    m8, f8 = _p8_measure(rows, settings), _p8_measure(fine_rows, fine_settings)
    sup8, ref8, refined8, moved8 = refined_conditions(m8["decides"], f8["decides"], what, {
        k: f8["stat"][k] for k in ("fraction_passing", "fraction_passing_if_censored_pass")})
    lo, hi = m8["stat"]["fraction_passing"], m8["stat"]["fraction_passing_if_censored_pass"]
    reps = set(settings.representatives())
    m3 = _p3_measure([x for x in rows if x["name"] in reps])
    f3 = _p3_measure([x for x in fine_rows if x["name"] in set(fine_settings.representatives())])
    sup3, ref3, refined3, moved3 = refined_conditions(m3["decides"], f3["decides"], what, {
        "fraction_attn_and_error_ok": f3["stat"]["fraction_attn_and_error_ok"]})
    return [
        claim("P8", crit8, m8["stat"], sup8, ref8, figures=[fig], runs=rel_runs(ctx, runs),
              censored=len(m8["stat"]["censored_runs"]), interval={"fraction_passing": [lo, hi]}, settings=settings,
              interval_covers={"fraction_passing": "the censored distinct settings counted as failing or as passing "
                               "(bounds, not an interval over randomness)"}, refinement=refined8,
              undecided_because=moved8 or m8["undecided"]),
        claim("P3", crit3, m3["stat"], sup3, ref3, figures=[fig], runs=rel_runs(ctx, runs),
              censored=m3["censored"], settings=settings, refinement=refined3,
              undecided_because=moved3 or m3["undecided"]),
    ]


def _beyond_runs(ctx: Context) -> tuple[list, list[dict], object]:
    """The runs of every (features, class, L) at ``ctx``'s approximation, a row per run, and their settings."""
    cfg = paper_base(ctx, "train.eps_mode=relative", f"train.eps={P8_EPS:g}", "task.kernel_samples=2048")
    configs = []
    for kind in ("orthonormal", "gaussian"):
        for cls in CLASSES:
            base = with_overrides(cfg, [f"features.kind={kind}", f"task.kind={cls}", "task.L=1"])
            L_star = L_star_of(base)  # delta does not depend on L: every class is rescaled to L
            for f in (0.5, 2.0):
                run_cfg = with_overrides(base, [f"task.L={f * L_star:.6g}", f"name={kind}-{cls}-{f:g}Lstar"])
                configs.append(with_budget(run_cfg, P8_EPS, cap=25 * ctx.sizes.budget))  # never the cap
    runs = run_group(ctx, "beyond", configs, "(f,g) classes and features")
    rows = []
    for r in runs:
        a = read_run_phases(r.metrics, r.summary["T_1"])
        eps_abs = r.config.train.eps * r.series("loss").iloc[0]
        rows.append({
            "name": r.config.name, "features": r.config.features.kind, "class": r.config.task.kind,
            "L_over_Lstar": r.config.task.L / r.summary["L_star"], "n_phases": a.n_phases,
            "converged": r.summary["status"] == "converged", "min_attn": r.summary["min_attn"],
            "test_error": r.summary.get("final_test_error"), "eps": eps_abs, "status": r.summary["status"],
        })
    return runs, rows, run_settings(runs)


def _p8_measure(rows: list[dict], settings) -> dict:
    """P8's share of passing distinct settings (other than the shape of orthonormal linear) and its conditions."""
    reps = set(settings.representatives())
    base_group = settings.group_of(next(x["name"] for x in rows if x["features"] == "orthonormal"
                                        and x["class"] == "linear"))
    beyond_rows = [x for x in rows if x["name"] in reps and x["name"] not in base_group.members]
    passed = [x["n_phases"] == 2 and x["converged"] for x in beyond_rows]
    frac8 = sum(passed) / len(passed)
    cens8 = [x["name"] for x in beyond_rows if (not x["converged"] and x["status"] == "budget")
             or (x["converged"] and x["n_phases"] is None)]  # not converged in budget, or a reading it cannot make
    frac8_hi = (sum(passed) + len(cens8)) / len(passed)  # censored runs counted as passing
    stat8 = {"fraction_passing": frac8, "fraction_passing_if_censored_pass": frac8_hi, "censored_runs": cens8,
             "distinct_settings_beyond": len(beyond_rows),
             "settings": {x["name"]: {"n_phases": x["n_phases"], "converged": x["converged"],
                                      "status": x["status"]} for x in rows}}
    decides = p8_rule(frac8, frac8_hi)
    und = "" if any(decides) else ("the share passing lies between the margins (or censored runs could move it "
                                   "across one); more settings or budgets that let the censored runs finish decide it")
    return {"stat": stat8, "decides": decides, "undecided": und}


def p8_rule(share: float, share_if_censored_pass: float) -> tuple[bool, bool]:
    """P8's (supported, refuted) from the share of distinct settings with 2 phases that converged."""
    return share >= 0.8, share_if_censored_pass <= 0.4


@controls("P8")
def p8_controls() -> Controls:
    """P8's rule on six synthetic converged runs: one curve at six time scales."""
    return share_controls(p8_rule, "fraction_passing_bounds", "converged runs")


def _p3_measure(rows: list[dict]) -> dict:
    """P3 from one row per distinct setting: attention and unseen-function error of those that reached eps."""
    conv = [x for x in rows if x["converged"]]
    ok3 = [_p3_ok(x) for x in conv]
    frac3 = sum(ok3) / len(ok3) if ok3 else math.nan
    stat3 = {"converged_runs": len(conv), "fraction_attn_and_error_ok": frac3,
             "per_run": {x["name"]: {"min_attn": x["min_attn"], "test_error": x["test_error"], "eps": x["eps"]}
                         for x in rows}}
    decides = p3_rule(ok3)
    und = "" if any(decides) else (
        "no run reached eps within its budget: budgets that let the runs converge decide it" if not ok3
        else f"{frac3:.0%} of the converged runs pass, between the margins (50%, 90%); more settings decide it")
    return {"stat": stat3, "decides": decides, "undecided": und, "censored": len(rows) - len(conv)}


def _p3_ok(row: dict) -> bool:
    """A converged setting's part in P3: min_k Attn_k >= 0.9 and error on unseen functions <= 1.5 eps."""
    return (row["min_attn"] is not None and row["min_attn"] >= 0.9 and row["test_error"] is not None
            and row["test_error"] <= 1.5 * row["eps"])


def p3_rule(ok: list[bool]) -> tuple[bool, bool]:
    """P3's (supported, refuted) from whether each converged distinct setting has min_k Attn_k >= 0.9 and an
    unseen-function error <= 1.5 eps."""
    share = sum(ok) / len(ok) if ok else math.nan
    return bool(ok) and share >= 0.9, bool(ok) and share < 0.5


def _p3_rows(min_attn: list[float], error_over_eps: float) -> list[dict]:
    return [{"name": f"s{i}", "converged": True, "min_attn": a, "test_error": error_over_eps, "eps": 1.0}
            for i, a in enumerate(min_attn)]


P3_CASES = {  # converged distinct settings: name -> (rows, what they are)
    "null": (_p3_rows([0.55, 0.6, 0.62, 0.7, 0.75, 0.8], 0.9), "six converged settings whose attention stalls at "
             "0.55-0.8 (what a degenerate class with delta = 0 allows), their error below eps"),
    "planted": (_p3_rows([0.93, 0.95, 0.97, 0.98, 0.99, 0.995], 0.8), "six converged settings with min_k Attn_k "
                "0.93-0.995 and error 0.8 eps"),
}
P3_ERROR_PART = ("the error part cannot fail on its own: a run converges when its loss, the error on functions drawn "
                 "from the class, is <= eps, and its unseen-function error is that loss on other draws: <= eps up to "
                 "sampling; the attention part decides")


@controls("P3")
def p3_controls() -> Controls:
    """P3's rule on six synthetic converged settings: it can fail through the attention part only."""
    def read(rows: list[dict], how: str):
        ok = [_p3_ok(x) for x in rows]
        return case(*p3_rule(ok), {"fraction_attn_and_error_ok": sum(ok) / len(ok), "note": P3_ERROR_PART}, how)

    return controls_from(P3_CASES, read)


def _beyond_figure(ctx, runs, rows) -> str:
    fig, axes = plots.figure(3, 1)
    classes = sorted({x["class"] for x in rows})
    cols = dict(zip(classes, plots.colors(len(classes)), strict=True))
    for r in runs:
        ls = "-" if r.config.features.kind == "orthonormal" else "--"
        amin, loss = r.series("attn_min"), r.series("loss")
        lw = 1.5 if r.config.task.L > r.summary["L_star"] else 0.8
        rel = (loss / loss.iloc[0])[loss.index > 0]  # step 0 is off the log x axis (no false plateau to it)
        amin = amin[amin.index > 0]
        axes[0][0].plot(amin.index, amin.values, ls, color=cols[r.config.task.kind], lw=lw)
        axes[0][1].semilogy(rel.index, rel.values, ls, color=cols[r.config.task.kind], lw=lw)
    for c in classes:
        axes[0][0].plot([], [], color=cols[c], label=c)
    axes[0][0].plot([], [], "k-", label="orthonormal")
    axes[0][0].plot([], [], "k--", label="gaussian")
    axes[0][0].set(title="min_k Attn_k (thick: 2 L*, thin: L*/2)", xlabel="step", xscale="log")
    axes[0][0].legend(fontsize=6)
    axes[0][1].set(title="loss / initial loss", xlabel="step", xscale="log")
    names = [x["name"].replace("orthonormal", "orth").replace("gaussian", "gaus") for x in rows]
    test = [x["test_error"] / x["eps"] if x["test_error"] is not None else np.nan for x in rows]
    axes[0][2].barh(range(len(rows)), test, color=[cols[x["class"]] for x in rows])
    axes[0][2].axvline(1.0, color="k", ls=":")
    axes[0][2].set_yticks(range(len(rows)), names, fontsize=5)
    axes[0][2].set(title="unseen-function error / eps (P3)", xscale="log")
    return plots.save(fig, ctx.out, "beyond_linear")


