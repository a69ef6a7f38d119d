"""Claims grouped by paper: each built-in claim belongs to one registered paper; `reproduce --list` and
docs/CLAIMS.md come from the registries; a user's paper is one package (here one file) on --plugins."""

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from lipschitz_icl.cli import app
from lipschitz_icl.experiments import paper_claims, papers, registered
from lipschitz_icl.experiments.claims import PAPER_OF, STATEMENTS
from lipschitz_icl.papers import BUILTIN
from lipschitz_icl.reproduce import listing_markdown, resolve_targets

ROOT = Path(__file__).resolve().parents[1]
cli = CliRunner()


def test_every_builtin_claim_belongs_to_one_paper_in_report_order():
    assert [p.id for p in papers()][:len(BUILTIN)] == list(BUILTIN)
    tested = {cid for exp in registered() for cid in exp.claims}
    builtin = {cid for exp in registered() if exp.__module__.startswith("lipschitz_icl.papers.") for cid in exp.claims}
    assert builtin <= {cid for pid in BUILTIN for cid in paper_claims(pid)}
    for paper in papers():
        if paper.id in BUILTIN:
            assert set(paper.claims) <= tested, paper.id  # a listed claim is tested by some experiment
            assert all(STATEMENTS[cid] for cid in paper.claims)
    assert PAPER_OF["B1"] == "writeup" and PAPER_OF["P5"] == "li2025"  # one experiment, two papers


def test_a_paper_id_selects_the_experiments_of_its_claims():
    names, chosen = resolve_targets(["huang2024"])
    assert names == ["huang2024"] and [e.__name__ for e in chosen] == ["exp_predecessor", "exp_predecessor_K"]
    _, writeup = resolve_targets(["writeup"])
    assert {"exp_scaling", "exp_threshold", "exp_writeup"} <= {e.__name__ for e in writeup}
    assert resolve_targets(["B4", "H1"])[0] == resolve_targets(["H1", "B4"])[0]  # one order for one selection


def test_list_prints_papers_claims_and_suites():
    res = cli.invoke(app, ["reproduce", "--list"], terminal_width=240)
    assert res.exit_code == 0, res.output
    for pid in BUILTIN:
        assert pid in res.output
    assert all(cid in res.output for cid in ("P4a", "H2", "B7", "R3d", "C1")) and "extensions" in res.output


def test_docs_claims_holds_the_generated_listing_word_for_word():
    text = (ROOT / "docs" / "CLAIMS.md").read_text()
    block = re.search(r"<!-- papers:start -->\n(.*)<!-- papers:end -->", text, re.S)
    assert block and block.group(1) == listing_markdown(), "regenerate: lipschitz-icl reproduce --list --markdown"


def test_a_plugin_paper_runs_resumes_and_is_grouped_by_paper(tmp_path, isolated_registry):
    out = tmp_path / "o"
    args = ["reproduce", "--plugins", "plugin_paper", "--paper", "plugin_paper", "--quick", "--out", str(out)]
    res = cli.invoke(app, args)
    assert res.exit_code == 0, res.output
    data = json.loads((out / "claims.json").read_text())
    (u1,) = data["claims"]
    assert (u1["id"], u1["paper"]) == ("U1", "plugin_paper") and u1["verdict"] in ("supported", "not supported")
    assert data["meta"]["papers"]["plugin_paper"]["citation"].startswith("A. Researcher, *A toy paper on attention*")
    again = cli.invoke(app, args)  # the same command resumes
    assert again.exit_code == 0 and "reused exp_toy_attention" in again.output
    other = cli.invoke(app, ["reproduce", "--paper", "plugin_paper", "--quick", "--out", str(out)])
    assert other.exit_code == 2 and "--plugins plugin_paper" in other.output  # the folder names its command


def test_a_missing_plugin_is_one_line_exit_2():
    res = cli.invoke(app, ["reproduce", "--plugins", "no_such_paper_module", "--list"])
    assert res.exit_code == 2 and "no_such_paper_module" in res.output and "Traceback" not in res.output


def test_the_report_groups_claims_by_paper_under_a_heading_each(tmp_path):
    from lipschitz_icl.experiments.claims import claim
    from lipschitz_icl.report import write_report_html, write_report_md

    claims = [claim(cid, "criterion", {"x": 1.0}, True, False) for cid in ("CL1", "H1", "P1", "H2")]
    for c in claims:
        c.paper = PAPER_OF[c.id]
    meta = {"command": "test", "size": "quick", "seed": 0, "wall_s": 1.0,
            "papers": {p.id: p.as_meta() for p in papers() if p.id in ("li2025", "huang2024", "collins2024")}}
    md = write_report_md(tmp_path, claims, meta).read_text()
    heads = [md.index(f"# {pid}: ") for pid in ("li2025", "huang2024", "collins2024")]
    claims_at = [md.index(f"## {cid} ") for cid in ("P1", "H1", "H2", "CL1")]
    assert heads[0] < claims_at[0] < heads[1] < claims_at[1] < claims_at[2] < heads[2] < claims_at[3]
    assert md.count("# huang2024: ") == 1 and "*Reachable: its abstract and its reviews" in md
    page = write_report_html(tmp_path, claims, meta, {}).read_text()
    assert page.index('id="paper-huang2024"') < page.index('id="H1"') < page.index('id="paper-collins2024"')
    assert "<em>In-Context Convergence of Transformers</em>" in page and "*In-Context" not in page  # no markdown
    one = write_report_md(tmp_path, claims[1:2], {**meta, "papers": {"huang2024": meta["papers"]["huang2024"]}})
    assert "# huang2024: " not in one.read_text()  # one paper: no grouping heading
