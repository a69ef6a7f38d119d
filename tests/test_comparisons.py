"""reproduce's comparison with baselines (C1): run at the tiny size, its CSV, figure and caption, and its
own report section after the claims, with no verdict and outside the claims table and claims.csv."""

from pathlib import Path

import pandas as pd
from claims_snapshot import check as check_snapshot
from test_reproduce import _Checker

from lipschitz_icl.evaluate import COLUMNS, MODEL
from lipschitz_icl.experiments import experiments_for, run_experiments
from lipschitz_icl.experiments.claims import NO_VERDICT, claim
from lipschitz_icl.experiments.runner import Context
from lipschitz_icl.experiments.sizes import TINY
from lipschitz_icl.papers.questions.vs_baselines import N_TRAIN
from lipschitz_icl.report import write_report


def test_comparison_runs_at_tiny_size_and_gets_its_own_report_section(tmp_path):
    ctx = Context(out=tmp_path, quick=True, sizes=TINY)
    exps = experiments_for(["comparisons"])
    assert [e.comparison for e in exps] == [True]
    (c1,) = run_experiments(ctx, exps)
    assert c1.criterion != "(experiment failed)", c1.notes
    assert c1.comparison and c1.verdict == NO_VERDICT and c1.id == "C1"
    check_snapshot([c1])
    table = pd.read_csv(tmp_path / c1.statistic["data"])
    assert list(table.columns) == COLUMNS
    assert table.n_context.max() == 4 * N_TRAIN and table.beyond_N.any()  # length generalisation: up to 4N
    assert {MODEL, "Bayes (Sigma)", "linear attention (GD)", "1-NN"} <= set(table.method)
    (fig,) = c1.figures
    assert all((tmp_path / fig).with_suffix(ext).is_file() for ext in (".png", ".pdf", ".svg"))
    assert fig in c1.captions and "beyond the training N" in c1.captions[fig]
    assert c1.statistic["warnings"], "noise-free prompts: 1-NN is exact from some n on, and that is said"

    p1 = claim("P1", "crit", {"x": 1.0}, True, False)
    write_report(tmp_path, [c1, p1], {"size": "tiny"})
    md = (tmp_path / "report.md").read_text()
    html = (tmp_path / "report.html").read_text()
    for text in (md, html):
        assert text.index("Comparisons with baselines") > text.index("P1")
        assert "trivially exact" in text or "exact there" in text
    checker = _Checker()
    checker.feed(html)
    assert not checker.errors and checker.stack == [] and {"P1", "C1"} <= checker.ids
    assert "| C1 |" not in md.split("Comparisons with baselines")[0]  # not in the claims table
    assert list(pd.read_csv(tmp_path / "claims.csv").id) == ["P1"]
    assert "Verdicts: supported: 1, not supported: 0, inconclusive: 0" in md


def test_the_cli_table_lists_a_comparison_without_a_verdict_colour_error(capsys):
    from lipschitz_icl.cli.reproduce import _print_claims
    from lipschitz_icl.experiments.claims import comparison

    c1 = comparison("C1", {"x": 1.0})
    odd = claim("P1", "crit", {}, True, False)
    odd.verdict = "something else"  # an unknown verdict gets the default style, not an empty markup tag
    _print_claims([c1, odd], {"size": "tiny", "wall_s": 1.0}, Path("out"))
    shown = capsys.readouterr().out
    assert NO_VERDICT.split()[0] in shown and "something" in shown


def test_the_readme_claims_table_leaves_comparisons_out(tmp_path):
    from lipschitz_icl.experiments.claims import comparison
    from lipschitz_icl.report import update_readme

    readme = tmp_path / "README.md"
    readme.write_text("top\n<!-- claims:start -->\nold\n<!-- claims:end -->\nbottom\n")
    assert update_readme(readme, [comparison("C1", {"x": 1.0}), claim("P1", "crit", {"x": 1.0}, True, False)],
                         "out", {"size": "quick"})
    text = readme.read_text()
    assert "| P1 |" in text and "| C1 |" not in text and "old" not in text
