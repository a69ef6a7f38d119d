"""The experiment registry: a toy experiment registered in this file appears in the suites, the CLI's
help and a ``reproduce`` run; suites and report order come from the claims table."""

import importlib
import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from lipschitz_icl import experiments, reproduce
from lipschitz_icl.cli import app
from lipschitz_icl.cli import reproduce as cli_reproduce
from lipschitz_icl.experiments import claims, registry
from lipschitz_icl.experiments.claims import STATEMENTS, ClaimResult, claim, claim_rank
from lipschitz_icl.experiments.runner import Context
from lipschitz_icl.report import sorted_claims

TOY_ID, TOY_SUITE = "T1", "toy"


@pytest.fixture
def toy_experiment(monkeypatch):
    """Register a toy claim and experiment; both are removed again after the test."""
    monkeypatch.setattr(registry, "_EXPERIMENTS", dict(registry._EXPERIMENTS))
    monkeypatch.setitem(claims.STATEMENTS, TOY_ID, "A toy claim: 1 + 1 = 2.")

    @registry.experiment(TOY_ID, suites=(TOY_SUITE,))
    def exp_toy(ctx: Context) -> list[ClaimResult]:
        total = 1 + 1
        return [claim(TOY_ID, "Supported if 1 + 1 == 2.", {"sum": total}, total == 2, total != 2)]

    return exp_toy


def test_toy_experiment_appears_in_suites_help_and_a_reproduce_run(toy_experiment, tmp_path):
    assert experiments.suites()[TOY_SUITE] == [toy_experiment]
    assert TOY_SUITE in reproduce.available_suites()
    claims_out, _ = reproduce.reproduce(TOY_SUITE, tmp_path, quick=True)
    assert [(c.id, c.verdict, c.experiment) for c in claims_out] == [(TOY_ID, "supported", "exp_toy")]
    data = json.loads((tmp_path / "claims.json").read_text())
    assert [c["id"] for c in data["claims"]] == [TOY_ID]
    assert data["claims"][0]["statement"] == STATEMENTS[TOY_ID]


def test_cli_help_and_suite_check_come_from_the_registry():
    # the typer Argument's help is built when the CLI module is imported: check the builder and
    # the validation, which call the registry at run time
    help_text = CliRunner().invoke(app, ["reproduce", "--help"], terminal_width=200).output
    for name in reproduce.available_suites():
        assert name in help_text
    bad = CliRunner().invoke(app, ["reproduce", "nosuchsuite"])
    assert bad.exit_code == 2
    assert "nosuchsuite" in bad.output and all(n in bad.output for n in reproduce.available_suites())


def test_toy_suite_appears_in_the_cli_help(toy_experiment, monkeypatch):
    # the argument's help is built when the command is defined: define it again with the toy registered
    try:
        toy_app = typer.Typer()
        toy_app.command("reproduce")(importlib.reload(cli_reproduce).reproduce_command)
        toy_app.command("other")(lambda: None)  # two commands, so the app keeps the "reproduce" name
        help_text = CliRunner().invoke(toy_app, ["reproduce", "--help"], terminal_width=200).output
        flat = " ".join(help_text.replace("│", " ").split())  # the help as one line, rich's box and wrapping gone
        assert f"extensions | comparisons | {TOY_SUITE} | all" in flat
    finally:
        monkeypatch.undo()
        importlib.reload(cli_reproduce)


def test_toy_suite_is_accepted_by_the_cli(toy_experiment, tmp_path):
    result = CliRunner().invoke(app, ["reproduce", TOY_SUITE, "--quick", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "o" / "claims.json").read_text())["claims"][0]["id"] == TOY_ID


def test_the_suites_in_claims_table_order():
    # the suites of claims in the order of their papers (the linear-attention neighbours after Collins et al.),
    # then the comparisons with baselines (no verdicts), after every claim
    assert reproduce.available_suites() == ["paper", "blog", "collins", "zhang", "zfb", "ahn", "mahankali", "lu",
                                            "linear", "extensions", "comparisons"]
    assert [e.__name__ for e in registry.registered() if e.comparison] == ["exp_baselines"]
    tested = {cid for exp in registry.registered() for cid in exp.claims}
    assert tested == set(STATEMENTS)  # every claim of the table is tested by some experiment


def test_an_experiment_needs_a_stated_claim_a_suite_and_a_new_name(monkeypatch):
    with pytest.raises(ValueError, match="Z9"):
        registry.experiment("Z9", suites=("paper",))
    with pytest.raises(ValueError, match="suite"):
        registry.experiment("P1", suites=())
    monkeypatch.setattr(registry, "_EXPERIMENTS", dict(registry._EXPERIMENTS))

    def exp_regimes(ctx):  # the name of a registered experiment
        return []

    with pytest.raises(ValueError, match="registered twice"):
        registry.experiment("P1", suites=("paper",))(exp_regimes)


def test_report_order_is_the_claims_table_order():
    ids = ["R3b", "B2", "P10", "R1", "H1", "P2", "R3a", "unknown"]
    results = [claim(cid, "", {}, True, False) for cid in ids]
    assert [c.id for c in sorted_claims(results)] == ["P2", "H1", "B2", "R1", "R3a", "R3b", "P10", "unknown"]
    assert claim_rank("P1") < claim_rank("H1") < claim_rank("B1") < claim_rank("R1")


def test_docs_claims_lists_every_claim_with_its_statement_and_experiment():
    text = (Path(__file__).resolve().parents[1] / "docs" / "CLAIMS.md").read_text()
    experiment_of = {cid: exp.__name__ for exp in registry.registered() for cid in exp.claims}
    for cid, statement in STATEMENTS.items():
        row = f"| {cid} | {statement.replace('|', chr(92) + '|')} | `{experiment_of[cid]}`"
        assert row in text, cid


def test_a_new_claim_in_one_file_brings_its_statement(monkeypatch, tmp_path):
    """Adding a claim is one file (statement, experiment, suite) plus a test: nothing else to edit."""
    monkeypatch.setattr(registry, "_EXPERIMENTS", dict(registry._EXPERIMENTS))
    try:
        @registry.experiment("T2", suites=("toy2",), statements={"T2": "A toy claim: 2 + 2 = 4."})
        def exp_toy2(ctx: Context) -> list[ClaimResult]:
            return [claim("T2", "Supported if 2 + 2 == 4.", {"sum": 4}, True, False)]

        assert STATEMENTS["T2"] == "A toy claim: 2 + 2 = 4." and "toy2" in reproduce.available_suites()
        claims_out, _ = reproduce.reproduce("toy2", tmp_path, quick=True)
        assert [(c.id, c.statement, c.verdict) for c in claims_out] == [("T2", STATEMENTS["T2"], "supported")]
        with pytest.raises(ValueError, match="another statement"):
            registry.experiment("T2", suites=("toy2",), statements={"T2": "Something else."})
    finally:
        STATEMENTS.pop("T2", None)
