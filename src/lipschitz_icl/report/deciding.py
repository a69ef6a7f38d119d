"""What decided each claim: the quantities of its statistic that its criterion compares with
thresholds, and the thresholds, so that the report's Why and its statistic table lead with them.

``DECIDING`` maps a claim id to its deciding quantities, each ``(path, rule)``: ``path`` names a value
of the statistic (``a/b`` for a nested one; ``lo..hi`` for the two ends of an interval; ``interval:NAME``
for ``ClaimResult.interval[NAME]``), ``rule`` says, in the criterion's own thresholds, what supports and
what refutes. A claim not listed (a new claim of a plugin) falls back to the statistic rows its
criterion names (``text.ranked_rows``). tests/test_report_readable.py checks that every path exists in the
statistic its experiment writes."""

from __future__ import annotations

from typing import Any

from ..experiments.claims import ClaimResult

_COMBINE = ("combined over the three Delta readings (delta.combine): supported when every reading supports, not "
            "supported when some reading, forced or not, contradicts")


def _by_reading(root: str, what: str) -> tuple[tuple[str, str], ...]:
    """The verdict of each Delta reading under ``root`` (rescale and tilt are one shape: forced), then ``what``."""
    return ((f"{root}/pair/verdict", f"pair (one pair moved; nothing fixes it): {what}"),
            (f"{root}/rescale/verdict", f"rescale (one shape: forced, still counted): {what}"),
            (f"{root}/tilt/verdict", f"tilt (one shape: forced, still counted); {_COMBINE}"))


_LOCATED = (  # P4b, P4c, P4d: the located change against 1/(Delta delta), per Delta reading
    *_by_reading("readings", "supports a power law (local slopes within 0.3 of the slope) with slope in [0.8, 1.2] "
                             "over a Delta delta span >= 3; refutes no power law or a slope outside [0.8, 1.2]"),
    ("readings/pair/slope", "exact log-log slope of the located L against 1/(Delta delta) on the pair reading, "
                            "predicted 1"),
    ("readings/pair/local_slopes", "its local slopes: within 0.3 of the slope for a power law"),
)

DECIDING: dict[str, tuple[tuple[str, str], ...]] = {
    "P1": (("fraction_two_phases", "runs in two phases: supports >= 0.8, refutes <= 0.2"),
           ("fraction_two_phases_bounds", "the fraction with censored runs counted either way: the verdict must "
                                          "hold at both ends")),
    "P2": (("interval:mean_R_gaussian", "95 % interval of mean R on gaussian features: supports below 0.9, refutes "
                                        "at or above 0.9"),),
    "P3": (("fraction_attn_and_error_ok", "converged runs with min_k Attn_k >= 0.9 and error <= 1.5 eps: supports "
                                          ">= 0.9, refutes < 0.5"),
           ("converged_runs", "the runs judged")),
    "P4": (("P4b/verdict", "a reading that is not forced supported: supports; every such reading not supported: "
                           "refutes"),
           ("P4c/verdict", "the same rule"), ("P4d/verdict", "the same rule"), ("P4a/verdict", "forced: not counted")),
    "P4a": (*_by_reading("readings", "supports some max/min over L of the rescaled time > 2, refutes every one <= "
                                     "1.25 with no run censored"),
            ("max_ratio", "largest max/min over L of the rescaled time (every reading is one shape under eta L^2)")),
    "P4b": (*_LOCATED, ("absolute_runs/max_relative_deviation", "runs off the invariance's prediction: above 0.1 "
                                                                "(or 2 steps) makes the reading inconclusive")),
    "P4c": _LOCATED,
    "P4d": _LOCATED,
    "P5": (*_by_reading("Delta_readings", "supports a power law in Delta with slope within 0.3 of -2; refutes no "
                                          "power law or a slope further off"),
           ("Delta_readings/pair/slope", "exact slope of T_eps against Delta on the pair reading, predicted -2"),
           ("Delta_readings/pair/local_slopes", "its local slopes: within 0.3 of the slope for a power law"),
           ("KlogK_slope", "exact slope of T_eps against K log(K/eps), predicted +1: within 0.3, and ..."),
           ("KlogK_is_power_law", "... its local slopes within 0.3 of it"),
           ("delta_axis_cv", "spread of T_1 eta L^2 delta^2 Delta^2 across classes: supports <= 0.25, refutes > 0.5"),
           ("censored_by_axis", "an axis with a censored run decides nothing, unless its bound keeps the verdict")),
    "P6": (("eta_max_slope_label_noise", "exact slope of log eta_max against log L with label noise (one "
                                         "deterministic curve): supports below -0.2, refutes within 0 +- 0.2 or above"),
           ("local_slopes_label_noise", "between successive L: supports every one negative, refutes one above +0.2")),
    "P7": (("flat_T_eps0.0001", "median time of the flat runs at eps = 1e-4 ..."),
           ("sharp_T_eps0.0001", "... against the sharp runs': supports flat faster here"),
           ("flat_T_eps0.01", "median time of the flat runs at eps = 1e-2 ..."),
           ("sharp_T_eps0.01", "... against the sharp runs': supports sharp faster here; the same regime faster at "
                               "both refutes"),
           ("unresolved_medians", "medians below 10 steps: any decides nothing")),
    "P8": (("fraction_passing", "settings passing, censored runs failing: supports >= 0.8"),
           ("fraction_passing_if_censored_pass", "settings passing, censored runs passing: refutes <= 0.4")),
    "P9": (("interval:min_attn_degenerate", "95 % interval of the median final min_k Attn_k of the degenerate class "
                                            "over settled seeds: supports at or below 0.75, refutes at or above 0.9"),
           ("interval:min_attn_control", "the same for the linear control: at or above 0.9 (it concentrates), else "
                                         "nothing is decided"),
           ("unsettled_runs", "runs whose 1 - min_k Attn_k still moved at their end: left out (5 settled seeds per "
                              "class needed)")),
    "H1": (("n_phases", "supports 2 phases with the final loss <= eps; refutes 1 phase or no convergence"),
           ("final_loss", "against eps"), ("status", "converged or not")),
    "H2": (("converged_step_by_feature", "supports the dominant feature 0 converging first; refutes a rare one "
                                         "first"),
           ("phases_by_feature", "phases read from each feature's own attention: supports one for the dominant and "
                                 "four for every converged rare feature; refutes more than one for the dominant or "
                                 "fewer than four for a converged rare one")),
    "H3": (("fits/K^2/fits", "T_conv = c K^2: every local slope of log T against log K^2 within 0.3 of 1"),
           ("fits/K log K/fits", "T_conv = c K log K, the same test: supports K^2 fitting and K log K not; refutes "
                                 "K log K fitting and K^2 not"),
           ("fits/K^2/local_slopes", "the local slopes against K^2"),
           ("fits/K log K/local_slopes", "the local slopes against K log K")),
    "B1": (("fast_T1_lo..fast_T1_hi", "95 % interval of the slope of T_1 against L, predicted -1: supports holding "
                                      "it (or within 0.3), refutes excluding it by more than 0.3"),
           ("slow_Teps_minus_T1_lo..slow_Teps_minus_T1_hi", "95 % interval of the slope of T_eps - T_1, predicted "
                                                            "-2: likewise")),
    "B2": (("flat_n_slope", "slope of the error against n below L*: supports in [-1.5, -0.5], refutes outside "
                            "[-2, -0.25]"),
           ("sharp_n_slope", "the same above L*"),
           ("error_ratio_sharp_over_flat", "error(2 L*) / error(L*/2) at the largest n: supports < 4, refutes >= "
                                           "16")),
    "B3": (*_by_reading("by_Delta_reading", "supports a threshold reading whose median r = L_x / sqrt(d/N) lies "
                                            "in [1/2, 2] with CV <= 0.25; refutes every median outside [1/4, 4] or "
                                            "CV > 0.5"),
           ("by_reading", "r of each threshold reading (P4b, P4c, P4d)")),
    "B4": (("pearson_r", "supports r >= 0.9 in every run; refutes some r < 0.5"),
           ("rate_constant_spread", "max_L c_L / min_L c_L: supports <= 2, refutes > 2")),
    "B5": (("spearman/final_attention", "claimed +: supports all three with the claimed sign and |rho| >= 0.6"),
           ("spearman/heldout_loss", "claimed -"),
           ("spearman/steps_to_5pct", "claimed -; two with rho x sign < 0.2 refute")),
    "B6": (("linear_fraction_one_phase", "linear runs in one phase: supports >= 0.8 (with |slope| < 0.3); refutes "
                                         "2 phases in >= 50 % (or |slope| > 1)"),
           ("nonlinear_fraction_two_phases", "nonlinear runs in two phases: supports >= 0.8"),
           ("censored_runs", "runs stopped at their budget: any makes it inconclusive")),
    "B7": (("ratio_eps0.03", "T_curriculum / T_none at eps = 0.03: supports <= 0.8 (at both)"),
           ("ratio_eps0.001", "at eps = 0.001: supports <= 0.8, refutes >= 0.95")),
    "R1": (("test_error_M_max", "supports <= 2 x the population's and <= error(M_min); refutes > 4 x the "
                                "population's or > 1.5 x error(M_min)"),
           ("population_test_error", "the reference"), ("test_error_M_min", "the smallest training set"),
           ("unsettled_runs", "deciding runs still moving at their budget: any makes it inconclusive")),
    "R2": (("reduced_rho", "phase ratio rho: supports > 1 for both models; refutes > 1 for one and <= 1 for the "
                           "other"),
           ("factored_rho", "the same rule")),
    "R3a": (("T_conv_dominant", "supports the dominant feature reaching 0.9 before every rare one ..."),
            ("T_conv_rare_min", "... the earliest rare one; refutes a rare one no later")),
    "R3b": (("interval:sigma_half_median", "95 % interval of the median sigma_half over seeds: supports above 1.05, "
                                           "refutes below 0.95"),
            ("unsettled_seeds", "seeds with a run still moving at its budget: left out (5 settled seeds needed)")),
    "R3c": (("min_final_attn", "supports every run >= 0.9; refutes a run at L >= 10 L* below 0.5"),
            ("T_eps_smallest_L", "T_eps at the smallest L ..."),
            ("T_eps_largest_L", "... against the largest: supports largest <= smallest, refutes largest > 2 x "
                                "smallest")),
    "R3d": (("optimum_min_attn", "min_k Attn_k at the optimum: supports >= 0.9 for every tau, refutes < 0.9 for "
                                 "some tau"),
            ("attn_gap_to_optimum", "trained against the optimum: supports <= 0.05, refutes > 0.15"),
            ("error_over_optimum", "supports <= 1.1, refutes > 1.5"),
            ("exact_optimum_min_attn", "the same at the exact optimum (refinement): the verdict must agree")),
    "R4": (("eps_exponent", "exact slope of log T_eps against log(1/eps) (one curve): supports <= 0.25, refutes "
                            ">= 0.5 ..."),
           ("local_slope_range", "... with every local slope within 0.3 of it (a power law)"),
           ("rms_log_model", "relative RMS of the logarithmic model ..."),
           ("rms_power_law", "... against the power law's: the better fit must agree"),
           ("levels_in_range", "eps levels reached in the range: needs >= 5")),
    "R5": (*_by_reading("by_Delta_reading", "supports a threshold reading with CV of L_x / L* <= 0.25 (span >= 3) "
                                            "and median in [1/3, 3]; refutes no CV <= 0.5, or every one outside "
                                            "[1/10, 10]"),
           ("by_reading", "CV and median of L_x / L* of each threshold reading")),
    "R6": (("local_slopes_Q", "local slopes of ||Q|| against L: supports every one > 0, refutes one < -0.1"),
           ("local_slopes_window", "of the attention window: supports every one < 0, refutes one > 0.1"),
           ("slope_Q", "slope of ||Q|| against L: refutes < 0.1"),
           ("slope_window", "slope of the attention window: refutes > 0")),
    "R7": (("best_head_attn_min", "supports >= 0.9; refutes < 0.5 while the transformer's error is within 2 x the "
                                  "reduced model's"),
           ("transformer_test_error", "against ..."), ("reduced_test_error", "... the reduced model's")),
    "R8": (("slope_T1_vs_L", "supports in [-2.4, -1.6] with every run converged; refutes outside [-2.8, -1.2] or a "
                             "run with min_k Attn_k < 0.5"),
           ("all_converged", "every run converged"), ("final_min_attn", "per run")),
}

_MISSING = object()


def lookup(c: ClaimResult, path: str) -> Any:
    """The value ``path`` names (see the module docstring), or ``_MISSING``."""
    if path.startswith("interval:"):
        return c.interval.get(path.removeprefix("interval:"), _MISSING)
    if ".." in path:
        lo, hi = (lookup(c, p) for p in path.split(".."))
        return _MISSING if _MISSING in (lo, hi) else [lo, hi]
    value: Any = c.statistic
    for part in path.split("/"):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def label(path: str) -> str:
    """How a quantity is named in the report: ``a/b`` as ``a › b``, an interval as ``[lo, hi]``."""
    if path.startswith("interval:"):
        return f"{path.removeprefix('interval:')} (95 % interval)"
    if ".." in path:
        return "[" + ", ".join(label(p) for p in path.split("..")) + "]"
    return " › ".join(path.split("/"))


def deciding(c: ClaimResult) -> list[tuple[str, Any, str]]:
    """(name, value, rule) of each deciding quantity of ``c`` that its statistic holds, in order."""
    found = []
    for path, rule in DECIDING.get(c.id, ()):
        value = lookup(c, path)
        if value is not _MISSING:
            found.append((label(path), value, rule))
    return found


def missing_paths(c: ClaimResult) -> list[str]:
    """The paths of DECIDING[c.id] its statistic does not hold (for the test that keeps the table true)."""
    return [path for path, _ in DECIDING.get(c.id, ()) if lookup(c, path) is _MISSING]


def deciding_roots(c: ClaimResult) -> set[str]:
    """The top-level statistic keys the deciding quantities come from (the table shows them first)."""
    roots = set()
    for path, _ in DECIDING.get(c.id, ()):
        if not path.startswith("interval:"):
            roots |= {p.split("/")[0] for p in path.split("..")}
    return roots
