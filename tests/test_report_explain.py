"""The report explains itself: a reason per verdict, the statistic as a table (raw JSON folded),
captions, each figure once, every config, warning badges, the forced flag, CSV/LaTeX exports,
quick vs full side by side, and `lipschitz-icl report OUT` regenerating it all without running."""

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from lipschitz_icl import plots
from lipschitz_icl.cli import app
from lipschitz_icl.experiments.claims import ClaimResult, claim
from lipschitz_icl.report import Comparison, regenerate_report, write_report
from lipschitz_icl.report.text import flatten, fmt, ranked_rows, reason

cli = CliRunner()
META = {"command": "test", "size": "quick", "seed": 0, "wall_s": 1.0}


def _figure(out: Path, stem: str) -> str:
    fig, ax = plots.figure()
    ax[0][0].plot([0, 1], [1, 0])
    ax[0][0].set_title(stem)  # two figures, two different files (the report keeps one of equal bytes)
    return plots.save(fig, out, stem)


def _run(out: Path, rel: str, status: str, steps: int) -> str:
    (out / rel).mkdir(parents=True)
    (out / rel / "summary.json").write_text(json.dumps({"status": status, "steps": steps}))
    (out / rel / "config.yaml").write_text(f"name: {Path(rel).name}\n")
    return rel


def _claims(out: Path) -> list[ClaimResult]:
    shared = _figure(out, "shared")
    own = _figure(out, "own")
    runs = [_run(out, "runs/g1/a", "trivial", 0), _run(out, "runs/g1/b", "converged", 40),
            _run(out, "runs/g2/c", "interrupted", 7)]
    return [
        claim("P4", "slope within 0.2 of -2", {"slope": -2.0012345, "by_L": {"0.5": 0.123456789, "8": None}},
              True, False, figures=[shared, own], runs=runs, forced=True,
              forced_reason="f = L g: GD depends on (eta, L) only through eta L^2", size="quick",
              captions={own: "Look at the slope of T_eps against L: the dashed line is -2."},
              interval={"slope": [-2.01, -1.99]}),
        claim("B3", "breakpoint within 2x of sqrt(d/n)", {"breakpoint": 8.19, "sqrt_d_over_N": 0.316}, False, False,
              figures=[shared], censored=3, undecided_because="the L grid stops at 8 L*; a finer grid above L*",
              size="quick"),
    ]


def test_statistic_is_flattened_and_formatted():
    rows = dict(flatten({"a": 0.123456789, "b": {"c": 12345678.0, "d": [1.0, 2.5]}, "e": None, "f": 3}))
    assert rows == {"a": "0.1235", "b › c": "1.23e+07", "b › d": "[1, 2.5]", "e": "—", "f": "3"}
    assert fmt(1e-5) == "1e-05" and fmt(True) == "yes"


def test_reason_speaks_of_the_flags():
    out = Path("/nonexistent")
    forced = claim("P4", "c", {"x": 1.0}, True, False, forced=True, forced_reason="the symmetry fixes it")
    assert "Supported" in reason(forced) and reason(forced).startswith("Forced, not evidence: the symmetry fixes it")
    undecided = claim("B3", "c", {"x": 1.0}, False, False, censored=2, undecided_because="more steps",
                      interval={"x": [0.5, 1.5]})
    text = reason(undecided)
    assert "Inconclusive" in text and "What would decide it: more steps" in text
    assert "2 run(s) are censored" in text and "x in [0.5, 1.5]" in text
    stopped = ClaimResult("P1", "", "(interrupted)", {"status": "interrupted"}, "inconclusive")
    assert reason(stopped).startswith("No verdict: the experiment was interrupted")
    assert "refutation" in reason(claim("P1", "c", {"x": 1.0}, False, True)) and out


def test_report_html_and_md_explain_each_claim(tmp_path):
    claims = _claims(tmp_path)
    for g in range(3, 16):  # 15 run groups in all: every config is listed (it used to stop at 12)
        _run(tmp_path, f"runs/group{g:02d}/r", "budget", 10)
    write_report(tmp_path, claims, META)
    page = (tmp_path / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 2  # 'shared' once, 'own' once
    assert 'Figure <code>shared.png</code>: shown under <a href="#P4">P4</a>' in page
    assert "Look at the slope of T_eps against L" in page  # the experiment's caption
    assert "shared (P4). What to look at" in page  # the generic one
    assert '<span class="forced"' in page and page.count('class="forced"') == 2  # table and section
    assert "⚠ 2 run(s) ended at step 0 or were interrupted" in page
    assert "runs/g1/a: trivial at step 0" in page and "runs/g2/c: interrupted at step 7" in page
    assert page.count("<details><summary>group") == 13 and "<details><summary>g1 (first of 2 runs" in page
    assert "<td>slope</td><td>-2.001</td>" in page and "<summary>raw statistic (JSON)</summary>" in page
    assert "What would decide it: the L grid stops at 8 L*" in page
    md = (tmp_path / "report.md").read_text()
    assert "## P4 — **forced** (outcome supported; not evidence) · ⚠ 2 run(s) need care" in md
    assert "| slope | -2.001 |" in md and "Figure `shared.png`: shown under [P4](#P4)." in md
    assert "**Why.** Inconclusive" in md


def test_exports_csv_and_latex(tmp_path):
    write_report(tmp_path, _claims(tmp_path), META)
    frame = pd.read_csv(tmp_path / "claims.csv")
    assert list(frame["id"]) == ["P4", "B3"] and list(frame["forced"]) == [True, False]
    assert list(frame["censored"]) == [0, 3]
    tex = (tmp_path / "claims.tex").read_text()
    assert "\\begin{tabular}" in tex and "P4 & supported & controls missing & quick & True & 0" in tex


def test_quick_and_full_side_by_side_say_why_they_differ(tmp_path):
    quick_dir, full_dir = tmp_path / "quick", tmp_path / "full"
    quick_dir.mkdir(), full_dir.mkdir()
    write_report(quick_dir, _claims(quick_dir), META)
    full = _claims(full_dir)
    full[1] = claim("B3", full[1].criterion, {"breakpoint": 1.1, "sqrt_d_over_N": 0.316}, False, True, size="full",
                    censored=0, figures=full[1].figures)
    write_report(full_dir, full, {**META, "size": "full"}, Comparison.load(quick_dir / "claims.json"))
    frame = pd.read_csv(full_dir / "claims.csv").set_index("id")
    assert frame.loc["B3", "verdict_before"] == "inconclusive" and frame.loc["B3", "verdict"] == "not supported"
    why = frame.loc["B3", "differs_because"]
    assert "censored runs 3 (quick) vs 0 (full)" in why and "breakpoint 8.19 → 1.1" in why
    assert pd.isna(frame.loc["P4", "differs_because"])  # same verdict: nothing to explain
    page = (full_dir / "report.html").read_text()
    assert "verdict at quick size" in page and "censored runs 3 (quick) vs 0 (full)" in page


def test_report_command_regenerates_without_running(tmp_path):
    write_report(tmp_path, _claims(tmp_path), META)
    before = (tmp_path / "claims.json").read_text()
    for name in ("report.html", "report.md", "claims.csv", "claims.tex"):
        (tmp_path / name).unlink()
    res = cli.invoke(app, ["report", str(tmp_path), "--compare-with", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert all((tmp_path / n).is_file() for n in ("report.html", "report.md", "claims.csv", "claims.tex"))
    assert (tmp_path / "claims.json").read_text() == before and not (tmp_path / "runs" / "x").exists()
    assert regenerate_report(tmp_path)[0].name == "report.md"


@pytest.mark.parametrize("case", ["no_dir", "no_claims", "bad_json", "bad_compare"])
def test_report_command_bad_input_is_one_line_exit_2(tmp_path, case):
    out = tmp_path / "o"
    if case != "no_dir":
        out.mkdir()
    if case == "bad_json":
        (out / "claims.json").write_text("{not json")
    if case == "bad_compare":
        write_report(out, _claims(out), META)
    args = ["report", str(out)] + (["--compare-with", str(tmp_path / "missing.json")] if case == "bad_compare" else [])
    res = cli.invoke(app, args)
    assert res.exit_code == 2 and "Traceback" not in res.output and len(res.output.strip().splitlines()) <= 2


def test_reproduce_compare_with_a_missing_file_exits_2_before_running(tmp_path):
    res = cli.invoke(app, ["reproduce", "P1", "--quick", "--out", str(tmp_path / "o"),
                           "--compare-with", str(tmp_path / "nope.json")])
    assert res.exit_code == 2 and "no such file" in res.output and not (tmp_path / "o").exists()


def test_claims_json_with_unknown_fields_still_loads(tmp_path):
    write_report(tmp_path, _claims(tmp_path), META)
    data = json.loads((tmp_path / "claims.json").read_text())
    data["claims"][0]["a_field_from_a_newer_version"] = 1
    (tmp_path / "claims.json").write_text(json.dumps(data))
    assert [c.id for c in Comparison.load(tmp_path).claims.values()] == ["P4", "B3"]


def test_the_footer_says_where_each_claims_data_is(tmp_path):
    (tmp_path / "data").mkdir()
    pd.DataFrame({"step": [0, 1], "loss": [1.0, 0.5]}).to_csv(tmp_path / "data" / "own.csv", index=False)
    claims = [claim("P1", "c", {"x": 1.0}, True, False, runs=[_run(tmp_path, "runs/g/a", "converged", 3)]),
              claim("P2", "c", {"x": 1.0}, True, False, data=["data/own.csv"]),
              claim("P3", "c", {"x": 1.0}, True, False)]
    write_report(tmp_path, claims, META)
    md, page = (tmp_path / "report.md").read_text(), (tmp_path / "report.html").read_text()
    assert "1 runs, under runs/g/" in md
    assert "its trajectories and tables: [data/own.csv](data/own.csv)" in md and 'href="data/own.csv"' in page
    assert "no runs of its own" in md and "no runs of its own" in page
    assert json.loads((tmp_path / "claims.json").read_text())["claims"][1]["data"] == ["data/own.csv"]


def test_the_abridged_statistic_leads_with_what_the_criterion_names():
    stat = {"L": 0.79, "budget": 80000, "unmeasured": None, "ratio_eps0.001": 0.987,
            "by_reading": {"P4b": {"median_r": 1.2}}}
    c = claim("B7", "Supported if the ratio is <= 0.8 at both; median_r in [1/2, 2]", stat, False, True)
    rows = ranked_rows(stat, c.criterion)
    assert {k for k, _ in rows[:2]} == {"ratio_eps0.001", "by_reading › P4b › median_r"}
    assert "unmeasured" not in dict(rows)  # an unmeasured value says nothing
    why = reason(c)  # B7's deciding quantities (report.deciding) come first, with their thresholds
    assert why.startswith("Not supported. Decided by ratio_eps0.001 = 0.987 (at eps = 0.001: supports <= 0.8, "
                          "refutes >= 0.95)")
    plugin = claim("X1", c.criterion, stat, False, True)  # a claim the report does not know: the criterion's names
    why = reason(plugin)
    assert "ratio_eps0.001 = 0.987" in why and why.index("ratio_eps0.001") < why.index("budget")
