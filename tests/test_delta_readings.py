"""The one Delta protocol in P5 (papers/li2025/scaling.py, scaling_delta.py, delta_axis.py) at the TINY size:
Delta moved three ways, each reading with its outcome, the forced ones refuting where they contradict."""

import pytest

from lipschitz_icl.experiments.runner import Context
from lipschitz_icl.experiments.sizes import TINY
from lipschitz_icl.papers.li2025 import scaling


def test_P5_reads_Delta_three_ways_and_a_forced_reading_that_contradicts_refutes_it(tmp_path):
    from_scaling = {c.id: c for c in scaling.exp_scaling(Context(out=tmp_path, quick=True, sizes=TINY))}
    p5 = from_scaling["P5"]
    readings = p5.readings
    assert set(readings) == {"rescale", "tilt", "pair"}
    for name in ("rescale", "tilt"):  # a rescaling: T ~ Delta^-6 exactly, one shape, forced
        assert readings[name]["forced_by"] and readings[name]["slope"] == pytest.approx(-6.0, abs=0.05)
        assert readings[name]["verdict"] == "not supported"
    assert not readings["pair"]["forced_by"] and readings["pair"]["distinct_settings"] == 4
    assert readings["pair"]["refinement"]["approximation"].startswith("4x the count draws")
    # no reading is set aside: the forced ones refute the Delta slope, and the claim says which
    assert p5.verdict == "not supported" and p5.forced and "rescale" in p5.forced_by
    assert set(p5.statistic["delta_axis_readings"]) == {"rescale", "tilt", "pair"}
