"""reproduce: the verdict rule, the report, and every experiment end to end at a tiny size."""

import json
from html.parser import HTMLParser

import pandas as pd
import pytest
from claims_snapshot import check as check_snapshot
from figure_layout import checked_figures, layout_problems

from lipschitz_icl.experiments import experiments_for, run_experiments
from lipschitz_icl.experiments.claims import (
    INCONCLUSIVE,
    NOT_SUPPORTED,
    STATEMENTS,
    SUPPORTED,
    VERDICTS,
    claim,
    verdict,
)
from lipschitz_icl.experiments.runner import Context
from lipschitz_icl.experiments.sizes import TINY
from lipschitz_icl.report import write_claims_json, write_report_html, write_report_md
from lipschitz_icl.report.deciding import missing_paths


@pytest.mark.parametrize("slope,expected", [(-2.05, SUPPORTED), (-0.9, NOT_SUPPORTED), (-1.7, INCONCLUSIVE)])
def test_verdict_returns_each_of_the_three_on_planted_data(slope, expected):
    # a planted statistic judged by a criterion fixed in advance: slope within 0.2 of -2 supports,
    # more than 0.5 away refutes, in between is inconclusive
    assert verdict(abs(slope + 2) <= 0.2, abs(slope + 2) > 0.5) == expected


def test_verdict_both_or_neither_is_inconclusive():
    assert verdict(True, True) == INCONCLUSIVE
    assert verdict(False, False) == INCONCLUSIVE


class _Checker(HTMLParser):
    VOID = {"meta", "img", "br", "hr", "link", "input"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.ids = [], [], set()

    def handle_starttag(self, tag, attrs):
        self.ids.update(v for k, v in attrs if k == "id")
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}>")
        else:
            self.stack.pop()


def test_report_is_valid_html_with_every_claim_and_escapes(tmp_path):
    from lipschitz_icl import plots

    fig, ax = plots.figure()
    ax[0][0].plot([0, 1], [0, 1])
    path = plots.save(fig, tmp_path, "f")
    claims = [claim(cid, "criterion <b>", {"x": 1.0, "note": "<script>"}, True, False, figures=[path])
              for cid in STATEMENTS]
    meta = {"command": "test", "size": "quick", "seed": 0, "wall_s": 1.0, "user": "<img src=x onerror=alert(1)>"}
    write_claims_json(tmp_path, claims, meta)
    write_report_md(tmp_path, claims, meta)
    page = write_report_html(tmp_path, claims, meta, {"cfg": "name: <x>"}).read_text()
    checker = _Checker()
    checker.feed(page)
    assert not checker.errors and checker.stack == []
    assert set(STATEMENTS) <= checker.ids
    assert "<script>" not in page and "onerror=alert" not in page.replace("onerror=alert(1)&gt;", "")
    assert page.count("data:image/png;base64,") == 1  # one figure shared by every claim: embedded once
    assert page.count("shown under") == len(STATEMENTS) - 1


@pytest.mark.parametrize("suite", ["paper", "blog", "linear"])
def test_every_experiment_runs_at_tiny_size(tmp_path, suite, monkeypatch):
    ctx = Context(out=tmp_path, quick=True, sizes=TINY)
    exps = experiments_for([suite])
    with checked_figures(monkeypatch) as layout:  # every figure as saved: no overlapping tick labels, no clipped title
        claims = run_experiments(ctx, exps)
    assert not layout, layout
    expected = {cid for e in exps for cid in e.claims}
    assert {c.id for c in claims} == expected
    for c in claims:
        assert c.verdict in VERDICTS
        assert c.criterion != "(experiment failed)", c.notes
        assert c.figures and all((tmp_path / f).is_file() for f in c.figures)
        assert c.statistic
        assert not missing_paths(c), (c.id, missing_paths(c))  # the report's deciding quantities are measured
        assert all(len(pd.read_csv(tmp_path / f)) > 0 for f in c.data), c.data  # tables of runs outside the engine
        if c.id == "B5":  # trained by its own loop: its trajectories and per-run numbers are tables
            assert c.data == ["data/B5_trajectories.csv", "data/B5_per_run.csv"]
        # every figure has its experiment's caption (what is plotted, what to look for), not the generic one
        assert all("look for" in c.captions.get(f, "").lower() for f in c.figures), (c.id, c.captions)
    undecided = [c.id for c in claims if c.verdict == INCONCLUSIVE and not c.undecided_because]
    assert not undecided, f"inconclusive without saying what would decide it: {undecided}"
    check_snapshot(claims)  # every number as in tests/data/claims_tiny.json (a refactor changes none)
    assert_budget_runs_censored(tmp_path, claims)


def assert_budget_runs_censored(out, claims) -> None:
    """No claim rests on a run that stopped at its step budget without counting it as censored."""
    for c in claims:
        budget = [r for r in c.runs if json.loads((out / r / "summary.json").read_text())["status"] == "budget"]
        assert c.censored_runs == budget and c.censored >= len(budget), (c.id, c.censored, budget)


def test_layout_check_finds_overlapping_ticks_and_a_clipped_title_and_save_fixes_the_ticks(tmp_path):
    from lipschitz_icl import plots

    fig, ax = plots.figure()
    ax[0][0].loglog([0.35, 4.5], [1, 2])  # about a decade: matplotlib labels the minor ticks, which collide
    ax[0][0].set_title("a title far too long for one panel of this figure, so it runs off both sides of it")
    found = layout_problems(fig)
    assert any("overlap" in p for p in found) and any("clipped" in p for p in found)
    ax[0][0].set_title("short")
    plots.save(fig, tmp_path, "planted")  # save gives matplotlib-ticked log axes the project's ticks
    assert layout_problems(fig) == []
