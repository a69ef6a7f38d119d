"""Faults of the sweep index: a disk that fills up while the index is written is one line, exit 1, and the index
stays readable with every run recorded before; columns holding values of another type (text in a number column,
a blob status) are one line, exit 2, from `sweep status` and `sweep table`."""

from __future__ import annotations

import errno
import sqlite3

import pytest
import yaml
from typer.testing import CliRunner

from lipschitz_icl.cli import app
from lipschitz_icl.sweep import index as index_module
from lipschitz_icl.sweep import load_index, load_runs, run_sweep

runner = CliRunner()
TINY = {"train": {"steps": 8, "log_every": 4}, "engine": {"draws": 8}, "eval": {"functions": 8}}


def spec(seeds: int) -> dict:
    return {"name": "r", "base": TINY, "grid": {"task.L": [1, 2]}, "seeds": seeds}


def _one_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


def _full_after(monkeypatch, pages: int) -> None:
    """The index's file may grow by ``pages`` pages, then SQLite reports it full (SQLITE_FULL, as a full disk)."""
    prepare = index_module.Index._prepare

    def limited(self):
        prepare(self)
        (count,) = self.db.execute("PRAGMA page_count").fetchone()
        self.db.execute(f"PRAGMA max_page_count={count + pages}")

    monkeypatch.setattr(index_module.Index, "_prepare", limited)


@pytest.mark.parametrize("pages", [0, 8])  # full when the points are registered; full while results are recorded
def test_a_full_disk_while_the_index_is_written_keeps_the_runs_recorded_before(tmp_path, monkeypatch, pages):
    out = tmp_path / "s"
    run_sweep(spec(1), out, workers=1)
    _full_after(monkeypatch, pages)
    with pytest.raises(OSError, match="index.sqlite: cannot be written") as caught:
        run_sweep(spec(40), out, workers=1, batch=1)
    assert caught.value.errno == errno.ENOSPC
    rows = load_index(out)
    finished = rows[rows["status"] != "pending"]
    assert (len(finished) > 2 if pages else len(finished) == 2)  # runs of this sweep recorded before it filled up
    assert len(load_runs(out, finished_only=True)) == len(finished)
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec(40)))
    result = runner.invoke(app, ["sweep", "run", str(tmp_path / "spec.yaml"), "--out", str(out), "--workers", "1",
                                 "--batch", "1"])
    assert result.exit_code == 1 and "index.sqlite: cannot be written" in _one_line(result)
    monkeypatch.undo()
    assert runner.invoke(app, ["sweep", "status", str(out)]).exit_code == 0


@pytest.mark.parametrize(("column", "value", "said"), [("elapsed_s", "12 s", "elapsed_s: string values"),
                                                       ("status", b"\x00\xff", "status: bytes values"),
                                                       ("final_loss", b"x", "final_loss: bytes values"),
                                                       ("finished_at", b"\x01", "finished_at: bytes values")])
def test_an_index_column_of_another_type_is_one_line_exit_2(tmp_path, column, value, said):
    out = tmp_path / "s"
    run_sweep(spec(1), out, workers=1)
    db = sqlite3.connect(out / "index.sqlite")
    with db:
        db.execute(f"UPDATE runs SET {column}=?", (value,))
    db.close()
    for command in ("status", "table"):
        result = runner.invoke(app, ["sweep", command, str(out)])
        assert result.exit_code == 2 and said in _one_line(result), result.output


@pytest.mark.parametrize("damaged", ['{"task.L": 1', '{"task.L": 1}, {"seed": 2}', "[1, 2]", "7"])
def test_axes_values_that_are_not_one_json_object_are_refused(tmp_path, damaged):
    """The axes of every row are decoded together (one JSON array) and row by row where that fails: a value that
    is not one JSON object (cut short, two objects that would pass as two rows, a list, a number) is refused."""
    run_sweep(spec(2), tmp_path, workers=1)
    assert list(load_index(tmp_path)["task.L"]) == [1, 1, 2, 2]
    with sqlite3.connect(tmp_path / "index.sqlite") as db:
        db.execute("UPDATE runs SET axes=? WHERE point=1", (damaged,))
    with pytest.raises(Exception, match="cannot hold") as info:
        load_index(tmp_path)
    assert "\n" not in str(info.value)
