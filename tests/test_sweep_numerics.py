"""A sweep records the numerics revision its finished rows were computed under (numerics.txt); run again by a
build of another revision (or over a sweep older than the record), its finished rows are trained again instead of
being kept beside rows of other numbers."""

from lipschitz_icl import NUMERICS_REVISION
from lipschitz_icl.sweep import load_index, run_sweep
from lipschitz_icl.sweep.execute import NUMERICS_FILE

TINY = {"train": {"steps": 30, "log_every": 5}, "engine": {"draws": 8}, "eval": {"functions": 8}}
SPEC = {"name": "n", "base": TINY, "grid": {"task.L": [1, 3]}}


def _to_do(out) -> int:
    """How many runs a rerun of SPEC into ``out`` trains."""
    totals: list[int] = []
    run_sweep(SPEC, out, workers=1, progress=lambda done, failed, total: totals.append(total))
    return totals[0]


def test_finished_rows_of_another_revision_are_trained_again(tmp_path):
    run_sweep(SPEC, tmp_path, workers=1)
    assert (tmp_path / NUMERICS_FILE).read_text().strip() == str(NUMERICS_REVISION)
    first = load_index(tmp_path).set_index("config_hash")["final_loss"]
    assert _to_do(tmp_path) == 0  # the same revision: nothing to do
    (tmp_path / NUMERICS_FILE).write_text(f"{NUMERICS_REVISION - 1}\n")  # as an earlier build left it
    assert _to_do(tmp_path) == 2
    (tmp_path / NUMERICS_FILE).unlink()  # a sweep older than the record
    assert _to_do(tmp_path) == 2
    assert _to_do(tmp_path) == 0 and (tmp_path / NUMERICS_FILE).read_text().strip() == str(NUMERICS_REVISION)
    again = load_index(tmp_path).set_index("config_hash")["final_loss"]
    assert again.sort_index().tolist() == first.sort_index().tolist()  # the same build: the same numbers


def test_rows_the_spec_no_longer_has_are_trained_again_when_a_spec_has_them_again(tmp_path):
    run_sweep(SPEC, tmp_path, workers=1)
    (tmp_path / NUMERICS_FILE).write_text(f"{NUMERICS_REVISION - 1}\n")  # as an earlier build left it
    other = {**SPEC, "grid": {"task.L": [3, 5]}}  # L = 1 left out, L = 3 kept
    run_sweep(other, tmp_path, workers=1)
    rows = load_index(tmp_path).set_index("task.L")["status"]
    assert rows[1] == "pending" and rows[3] != "pending" and rows[5] != "pending"  # L = 1: another revision's
    assert _to_do(tmp_path) == 1  # SPEC again: L = 1 is trained again, not read as this revision's
