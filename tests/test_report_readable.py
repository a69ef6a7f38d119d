"""A report a researcher can read: each figure (by its bytes) embedded once, at its natural size and
linked to its files; figures laid out for the page (never wider than it, no text too small to read);
the Why leads with the deciding quantities and their thresholds; per-run dumps folded; a forced
outcome never styled as green evidence; the claims table never cuts an item mid-word."""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
from pathlib import Path

from figure_layout import layout_problems
from matplotlib.text import Text

from lipschitz_icl import plots
from lipschitz_icl.experiments.claims import claim
from lipschitz_icl.plots.files import MIN_FONT_PT, PAGE_WIDTH_IN
from lipschitz_icl.plots.style import DPI
from lipschitz_icl.report import claims_table_md, write_report
from lipschitz_icl.report.html import VERDICT_COLOURS, png_size
from lipschitz_icl.report.text import flatten

META = {"command": "test", "size": "quick", "seed": 0, "wall_s": 1.0}


def _figure(out: Path, stem: str, ncols: int = 1, width: float = 4.2) -> str:
    fig, axes = plots.figure(ncols, 1, width=width)
    for i, ax in enumerate(axes[0]):
        ax.plot([0, 1], [i, 1 - i], label="a curve")
        ax.set_title(f"{stem} panel {i}")
        ax.legend(fontsize=6)
    return plots.save(fig, out, stem)


def _embedded_pngs(page: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([^"]+)"', page)]


def _section(page: str, cid: str) -> str:
    start = page.index(f'<section id="{cid}">')
    return page[start:page.index("</section>", start)]


def test_no_figure_file_is_shown_twice_by_its_bytes(tmp_path):
    a = _figure(tmp_path, "threshold_readings")
    b = "figures/regimes_visible.png"
    shutil.copy(tmp_path / a, tmp_path / b)  # two names, the same bytes (as two experiments save one figure)
    c = _figure(tmp_path, "regimes_flat")
    claims = [claim("P1", "c", {"x": 1.0}, True, False, figures=[c]),
              claim("P4a", "c", {"x": 1.0}, True, False, figures=[a]),
              claim("R5", "c", {"x": 1.0}, True, False, figures=[b])]
    write_report(tmp_path, claims, META)
    page = (tmp_path / "report.html").read_text()
    digests = [hashlib.sha256(png).hexdigest() for png in _embedded_pngs(page)]
    assert len(digests) == len(set(digests)) == 2
    assert "the same figure as <code>threshold_readings.png</code>" in _section(page, "R5")
    assert '<a href="#P4a">P4a</a>' in _section(page, "R5")
    md = (tmp_path / "report.md").read_text()
    assert len(re.findall(r"!\[[^]]*\]\(figures/", md)) == 2  # each image once
    assert "![P4a: threshold_readings.png](figures/threshold_readings.png)" in md
    assert "Figure `regimes_visible.png` (the same figure as `threshold_readings.png`): shown under [P4a]" in md


def test_figures_are_shown_at_their_natural_size_and_linked_to_their_files(tmp_path):
    f = _figure(tmp_path, "own", ncols=2)
    write_report(tmp_path, [claim("P3", "c", {"x": 1.0}, True, False, figures=[f])], META)
    page = (tmp_path / "report.html").read_text()
    assert "820px" not in page and "width:820" not in page
    width, height = png_size((tmp_path / f).read_bytes())
    assert f'<a href="{f}" title="open own.png at full size"><img alt="{f}" width="{width}" height="{height}"' in page
    assert 'href="figures/own.pdf">PDF</a>' in page and 'href="figures/own.svg">SVG</a>' in page
    assert "figure img{max-width:100%;height:auto" in page  # natural size, never wider than the window


def test_a_wide_figure_is_folded_to_the_page_and_no_text_is_too_small(tmp_path):
    rel = _figure(tmp_path, "wide", ncols=4, width=4.4)  # 17.6 inches: 1936 px
    width, height = png_size((tmp_path / rel).read_bytes())
    assert width <= PAGE_WIDTH_IN * DPI and height > 2 * 3.2 * DPI * 0.9  # two rows of two panels
    fig, axes = plots.figure(4, 1, width=4.4)
    axes[0][0].legend(handles=axes[0][0].plot([1, 2], label="x"), fontsize=6)
    axes[0][1].annotate("note", (1, 1), fontsize=5)
    axes[0][2].tick_params(labelsize=5)
    plots.save(fig, tmp_path, "small_text")
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_text()]
    assert min(sizes) >= MIN_FONT_PT and fig.get_size_inches()[0] <= PAGE_WIDTH_IN


def test_why_names_the_deciding_quantities_with_their_thresholds_first(tmp_path):
    forced = {"verdict": "supported", "forced_by": "feature rescaling", "slope": 1.0}
    stat = {"readings": {"pair": {"verdict": "not supported", "slope": 0.0403, "local_slopes": [0.06, 0.02]},
                         "rescale": forced, "tilt": forced},
            "cv_Lx_dd": 0.1067, "absolute_runs": {"runs": {f"r{i}": {"T_eps": i} for i in range(30)},
                                                  "max_relative_deviation": 0.08}}
    write_report(tmp_path, [claim("P4b", "(the criterion)", stat, False, True)], META)
    page = (tmp_path / "report.html").read_text()
    why = re.search(r"<p class=why><b>Why.</b> (.*?)</p>", page).group(1)
    assert why.startswith("Not supported. Decided by readings › pair › verdict = not supported (pair (one pair "
                          "moved; nothing fixes it): supports a power law")
    assert "readings › pair › slope = 0.0403" in why and "and 154 more" not in why and "r17" not in why
    assert why.index("pair › verdict") < why.index("rescale › verdict") < why.index("max_relative_deviation")
    section = _section(page, "P4b")
    before_folds = section[:section.index("<details>")]
    assert "deciding quantity" in before_folds and "absolute_runs › runs" not in before_folds  # the dump is folded
    assert "<summary>absolute_runs: 31 values</summary>" in section


def test_a_forced_claim_is_never_styled_as_green_evidence(tmp_path):
    forced = claim("P1", "c", {"x": 1.0}, True, False, forced=True, forced_reason="f = L g fixes it")
    write_report(tmp_path, [forced], META)
    page = (tmp_path / "report.html").read_text()
    heading = re.search(r'<section id="P1"><h2>(.*?)</h2>', page).group(1)
    assert VERDICT_COLOURS["supported"] not in heading and 'class="forced"' in heading and "not evidence" in heading
    assert "| P1 | **forced** (outcome supported; not evidence) |" in claims_table_md([forced])
    assert (tmp_path / "claims.csv").read_text().count("True") == 1  # still recorded as forced in the table


def test_the_claims_table_never_cuts_an_item_mid_word():
    stat = {f"n_phases_by_L[{x}]": 2 for x in ("0.474", "0.791", "1.11", "2.37", "4.74", "9.49")}
    stat |= {"fraction_two_phases_long_name_of_a_quantity": 1.0, "censored": []}
    c = claim("X9", "fraction_two_phases_long_name_of_a_quantity at least 0.8", stat, True, False)
    cell = claims_table_md([c]).splitlines()[-1].split(" | ")[3]
    shown, _, rest = cell.partition(" … ")
    names = {f"{k}={v}" for k, v in flatten(stat)}
    assert all(item in names for item in shown.split(", ")), shown
    assert shown.startswith("fraction_two_phases_long_name_of_a_quantity=1") and re.fullmatch(r"\(\d+ more\)", rest)


def test_a_folded_figure_says_how_its_captions_positions_map(tmp_path):
    wide = _figure(tmp_path, "wide", ncols=4, width=4.4)
    narrow = _figure(tmp_path, "narrow", ncols=2)
    claims = [claim("P1", "c", {"x": 1.0}, True, False, figures=[wide, narrow],
                    captions={wide: "Top row: the loss. Look for the bottom middle panel.", narrow: "Left: x."})]
    write_report(tmp_path, claims, META)
    page = (tmp_path / "report.html").read_text()
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", page)
    assert captions[0].startswith("Laid out in 2 columns to fit the page (drawn in rows of 4)")
    assert captions[1] == "Left: x."
    assert "Laid out in 2 columns" in (tmp_path / "report.md").read_text()


def test_crowded_category_labels_get_room_not_a_smaller_font(tmp_path):
    fig, axes = plots.figure(3, 1, height=2.0)
    names = [f"setting-{i}-0.5Lstar" for i in range(16)]
    axes[0][2].barh(range(16), [1.0] * 16)
    axes[0][2].set_yticks(range(16), names)
    plots.save(fig, tmp_path, "crowded")
    assert layout_problems(fig) == [] and fig.get_size_inches()[1] > 2.0  # taller, not squeezed
    assert min(t.get_fontsize() for t in fig.findobj(Text) if t.get_text()) >= MIN_FONT_PT


def test_every_figure_says_how_to_redraw_it_alone(tmp_path):
    from lipschitz_icl.report.html import write_report_html
    from lipschitz_icl.report.md import write_report_md

    fig = _figure(tmp_path, "regimes_flat")
    c = claim("P1", "crit", {"x": 1.0}, True, False, figures=[fig],
              runs=["runs/regimes-flat/flat-L0.5", "runs/regimes-flat/flat-L0.8", "runs/regimes-sharp/sharp-L3"])
    meta = {"command": "lipschitz-icl reproduce paper --quick --seed 3 --plugins my_claims", "size": "quick",
            "seed": 3, "wall_s": 1.0}
    md = write_report_md(tmp_path, [c], meta).read_text()
    want = "`lipschitz-icl reproduce P1 --quick --seed 3 --plugins my_claims --out redraw-P1`"
    assert f"**Redraw alone.** {want}" in md
    assert "[runs/regimes-flat/](runs/regimes-flat/), [runs/regimes-sharp/](runs/regimes-sharp/)" in md
    html = write_report_html(tmp_path, [c], meta, {}).read_text()
    assert "<b>Redraw alone.</b> <code>lipschitz-icl reproduce P1 --quick --seed 3" in html
    assert '<a href="runs/regimes-sharp/">' in html
    full = write_report_md(tmp_path, [claim("P1", "c", {}, True, False, figures=[fig])], {"size": "full"}).read_text()
    assert "`lipschitz-icl reproduce P1 --out redraw-P1`" in full  # no run folders to link
