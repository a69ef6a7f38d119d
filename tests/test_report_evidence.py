"""The report shows what a verdict rests on: the claims table's "distinct settings" and "forced by", each claim's
settings (fingerprints and copies), its verdict per reading, what each interval covers and the refinement
outcome; claims.json and claims.csv keep them."""

import json
import re

import lipschitz_icl as li
from lipschitz_icl.experiments.claims import claim
from lipschitz_icl.experiments.evidence import refinement, settings_of
from lipschitz_icl.report import claims_table_md, regenerate_report, write_report

META = {"command": "test", "size": "quick", "seed": 0, "wall_s": 1.0}


def _copies():
    """Three configs: two copies of one shape (L moves only the time scale) and one other geometry."""
    base = li.load_config(None, ["engine.counts=mean_field", "features.kind=orthonormal", "features.K=5",
                                 "features.d=5"])
    named = [("L1", base.with_overrides(["task.L=1.0"])), ("L2", base.with_overrides(["task.L=2.0"])),
             ("gauss", base.with_overrides(["features.kind=gaussian", "features.d=8"]))]
    return settings_of(named), settings_of(named[:2])


def _claims():
    mixed, one_shape = _copies()
    forced = claim("P1", "c", {"x": 1.0}, True, False, settings=one_shape)
    read = claim("P5", "every reading supports it", {"slope": -2.0}, True, False, settings=mixed,
                 interval={"slope": [-2.2, -1.8]}, interval_covers={"slope": "7 seeds redrawing the features"},
                 refinement=refinement("supported", "not supported", "4x the count draws", {"slope": -1.4}),
                 readings={"rescale": {"verdict": "not supported", "forced_by": "feature rescaling",
                                       "distinct_settings": 1, "slope": -6.0},
                           "pair": {"verdict": "supported", "distinct_settings": 4, "slope": -2.1,
                                    "local_slopes": [-1.9, -2.3]}})
    plain = claim("B2", "c", {"x": 1.0}, True, False)
    return forced, read, plain


def test_the_claims_table_has_distinct_settings_and_forced_by(tmp_path):
    forced, read, plain = _claims()
    table = claims_table_md([forced, read, plain]).splitlines()
    assert table[0].split(" | ")[4:6] == ["distinct settings", "forced by"]
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in table[2:]}
    assert rows["P1"][4] == "1 of 2" and "eta L^2" in rows["P1"][5]
    assert rows["P5"][4] == "2 of 3" and rows["P5"][5] == ""
    assert rows["B2"][4] == "—" and rows["B2"][5] == ""
    write_report(tmp_path, [forced, read, plain], META)
    page = (tmp_path / "report.html").read_text()
    head = re.search(r"<h2>Claims</h2><table>(.*?)</tr>", page).group(1)
    assert "<th>distinct settings</th><th>forced by</th>" in head
    assert '<td>1 of 2</td><td>eta L^2 (time rescaling)</td>' in page
    frame = (tmp_path / "claims.csv").read_text().splitlines()
    assert "distinct_settings" in frame[0] and "forced_by" in frame[0]
    saved = {c["id"]: c for c in json.loads((tmp_path / "claims.json").read_text())["claims"]}
    assert saved["P1"]["forced_by"] and saved["P5"]["distinct_settings"] == 2


def test_a_section_lists_fingerprints_copies_readings_covers_and_refinement(tmp_path):
    forced, read, plain = _claims()
    write_report(tmp_path, [forced, read, plain], META)
    md = (tmp_path / "report.md").read_text()
    section = md[md.index('<a id="P5">'):md.index('<a id="B2">')]
    fingerprints = [g["fingerprint"] for g in read.settings["groups"]]
    assert all(f in section for f in fingerprints) and "L2: eta L^2 (time rescaling)" in section
    assert "| rescale | not supported | feature rescaling | 1 | slope = -6 |" in section
    assert "| pair | supported |  | 4 | slope = -2.1, local_slopes = [-1.9, -2.3] |" in section
    assert "| slope | [-2.2, -1.8] | 7 seeds redrawing the features |" in section
    assert "Recomputed with 4x the count draws: not supported" in section and "inconclusive" in section
    b2 = md[md.index('<a id="B2">'):]
    assert "**Per reading.**" not in b2 and "**Settings.**" not in b2 and "**Refinement.**" not in b2
    page = (tmp_path / "report.html").read_text()
    p5 = page[page.index('<section id="P5">'):page.index('<section id="B2">')]
    assert '<table class="readings">' in p5 and '<table class="covers">' in p5 and fingerprints[0] in p5
    assert '<span class="forced"' in page[page.index('<section id="P1">'):]  # forced keeps its own word


def test_regenerating_from_claims_json_keeps_the_evidence(tmp_path):
    write_report(tmp_path, list(_claims()), META)
    first = (tmp_path / "report.md").read_text()
    regenerate_report(tmp_path)
    assert (tmp_path / "report.md").read_text() == first
