"""Trackers (``--tracker tensorboard``, ``li.run(..., tracker=...)``): the event file holds the run's metrics at
the same steps (float32, as TensorBoard stores them) and its config; values are sent as they are recorded; a bad
tracker name is one line, exit 2; no tracker, no event file."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_support import refused, runner

import lipschitz_icl as li
from lipschitz_icl import tracking
from lipschitz_icl.cli import app
from lipschitz_icl.errors import UserInputError
from lipschitz_icl.experiments.runner import Context, base_config, run_group
from lipschitz_icl.tracking import TensorBoardTracker, tag_of

pytest.importorskip("tensorboard")  # the test extra installs it (lipschitz-icl[tracking])
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from tensorboard.util.tensor_util import make_ndarray  # noqa: E402

SMALL = ["train.steps=40", "train.log_every=5", "engine.draws=32", "eval.functions=32"]
CONFIGS = {
    "kernel": SMALL,  # the batched trainer (one run): records sent from the batch loop
    "kernel-geometry": [*SMALL, "eval.geometry=true"],  # metrics derived from the scores per record
    "sampled": ["engine.kind=sampled", "engine.batch=64", "train.steps=12", "train.log_every=3",
                "eval.functions=32"],  # the optimizer loop (Recorder.record)
}


def events(run_dir: Path) -> EventAccumulator:
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def expected_series(metrics: pd.DataFrame) -> dict[str, pd.Series]:
    """What the tracker must hold: each row without n, by tag, indexed by step."""
    rows = metrics[metrics.n.isna()]
    tags = [tag_of(m, None if pd.isna(k) else int(k)) for m, k in zip(rows.metric, rows.k, strict=True)]
    return {tag: group.set_index("step")["value"] for tag, group in rows.assign(tag=tags).groupby("tag")}


def event_files(run_dir: Path) -> list[Path]:
    return sorted(run_dir.glob("events.out.tfevents.*"))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_event_file_holds_the_metrics_at_their_steps_and_the_config(tmp_path, quickstart_path, name):
    run = li.run(quickstart_path, CONFIGS[name], out=tmp_path / "r", tracker="tensorboard")
    assert len(event_files(run.dir)) == 1
    acc = events(run.dir)
    want = expected_series(run.metrics)
    assert set(acc.Tags()["scalars"]) == set(want)
    assert {"loss", "test_error", "attn_min", "grad_norm", "attn_self/k0"} <= set(want)
    if name == "kernel-geometry":
        assert {"Q_norm_2", "window", "n_eff"} <= set(want)
    for tag, series in want.items():
        got = acc.Scalars(tag)
        assert [e.step for e in got] == series.index.tolist(), tag
        np.testing.assert_allclose([e.value for e in got], series.to_numpy(np.float32), rtol=2e-7, atol=1e-37,
                                   err_msg=tag)  # TensorBoard stores float32
    text = make_ndarray(acc.Tensors("config/text_summary")[0].tensor_proto).item().decode()
    assert text == f"```yaml\n{(run.dir / 'config.yaml').read_text()}```"


class Collect:
    """A Tracker object: keeps what it is sent, and when (the records made so far by the progress callback)."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, dict[str, float]]] = []
        self.closed = False

    def add_scalars(self, step: int, values: dict[str, float]) -> None:
        self.sent.append((step, dict(values)))

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("name", ["kernel", "sampled"])
def test_values_are_sent_as_they_are_recorded_not_at_the_end(quickstart_path, name):
    sink, seen_at_progress = Collect(), []
    run = li.run(quickstart_path, CONFIGS[name], write=False, tracker=sink,
                 progress=lambda step, loss, attn_min: seen_at_progress.append((step, sink.sent[-1][0])))
    steps = sorted(run.metrics.step.unique().tolist())
    assert [s for s, _ in sink.sent] == steps and len(steps) > 2
    assert all(step == last_sent for step, last_sent in seen_at_progress)  # sent by the time the step is reported
    assert not sink.closed  # a caller's tracker stays open
    for step, values in sink.sent:
        assert values["loss"] == run.series("loss")[step]  # the same float64 numbers as metrics.parquet


def test_event_file_is_flushed_while_the_writer_is_open(tmp_path):
    tracker = TensorBoardTracker(tmp_path, "a: 1\n", flush_s=0.1)
    try:
        tracker.add_scalars(3, {"loss": 0.25})
        deadline = time.monotonic() + 20
        while "loss" not in events(tmp_path).Tags()["scalars"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [(e.step, e.value) for e in events(tmp_path).Scalars("loss")] == [(3, 0.25)]
    finally:
        tracker.close()


def test_no_tracker_writes_no_event_file(tmp_path, quickstart_path):
    run = li.run(quickstart_path, SMALL, out=tmp_path / "api")
    result = runner.invoke(app, ["run", str(quickstart_path), *SMALL, "--out", str(tmp_path / "cli")])
    assert result.exit_code == 0, result.output
    for folder in (run.dir, tmp_path / "cli"):
        assert sorted(p.name for p in folder.iterdir()) == ["config.yaml", "metrics.parquet", "params.pt",
                                                             "summary.json"]


def test_cli_tracker_and_force_leave_one_event_file(tmp_path, quickstart_path):
    out = tmp_path / "r"
    for extra in ([], ["--force"]):
        result = runner.invoke(app, ["run", str(quickstart_path), *SMALL, "--out", str(out), "--tracker",
                                     "tensorboard", *extra])
        assert result.exit_code == 0, result.output
    assert len(event_files(out)) == 1  # --force removed the previous run's
    assert events(out).Scalars("loss")[0].step == 0


def test_unknown_tracker_is_one_line_and_no_run_directory(tmp_path, quickstart_path):
    line = refused(["run", str(quickstart_path), *SMALL, "--out", str(tmp_path / "r"), "--tracker", "wandb"])
    assert "--tracker wandb" in line and "tensorboard" in line
    assert not (tmp_path / "r").exists()


def test_missing_package_says_how_to_install(tmp_path, quickstart_path, monkeypatch):
    monkeypatch.setattr(tracking, "installed", lambda package: False)
    line = refused(["run", str(quickstart_path), *SMALL, "--out", str(tmp_path / "r"), "--tracker", "tensorboard"])
    assert "pip install tensorboard" in line and "lipschitz-icl[tracking]" in line
    assert not (tmp_path / "r").exists()


def test_a_writer_that_cannot_be_imported_is_one_line_before_any_run_directory(tmp_path, quickstart_path,
                                                                                monkeypatch):
    monkeypatch.setitem(tracking.TRACKERS, "tensorboard", (TensorBoardTracker, "tensorboard", "no_such_writer_mod"))
    line = refused(["run", str(quickstart_path), *SMALL, "--out", str(tmp_path / "r"), "--tracker", "tensorboard"])
    assert "cannot import no_such_writer_mod" in line and "pip install" in line
    assert not (tmp_path / "r").exists()


def test_api_refuses_a_tracker_name_without_a_run_directory_or_a_non_tracker(quickstart_path):
    with pytest.raises(UserInputError, match="needs write=True"):
        li.run(quickstart_path, SMALL, write=False, tracker="tensorboard")
    with pytest.raises(UserInputError, match="add_scalars"):
        li.run(quickstart_path, SMALL, write=False, tracker=object())


class Broken(Collect):
    def add_scalars(self, step: int, values: dict[str, float]) -> None:
        raise OSError("No space left on device")


def test_a_failing_tracker_is_dropped_with_a_warning_and_the_run_goes_on(quickstart_path):
    plain = li.run(quickstart_path, SMALL, write=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = li.run(quickstart_path, SMALL, write=False, tracker=Broken())
    assert [str(w.message).split(":")[0] for w in caught] == ["tracker Broken stopped"]
    assert run.summary["status"] == plain.summary["status"]
    pd.testing.assert_frame_equal(run.metrics, plain.metrics)


def test_reproduce_runs_get_their_event_files_as_they_are_written(tmp_path):
    ctx = Context(out=tmp_path, quick=True, tracker="tensorboard")
    cfgs = [base_config([*SMALL, f"task.L={L}", f"name=L{L}"]) for L in (1, 2)]
    for run in run_group(ctx, "g", cfgs):
        assert len(event_files(run.dir)) == 1
        want = expected_series(li.load_run(run.dir).metrics)["attn_min"]
        got = events(run.dir).Scalars("attn_min")
        assert [e.step for e in got] == want.index.tolist()
        np.testing.assert_allclose([e.value for e in got], want.to_numpy(np.float32), rtol=2e-7)


def test_reproduce_refuses_an_unknown_tracker_before_writing(tmp_path):
    line = refused(["reproduce", "P1", "--quick", "--out", str(tmp_path / "o"), "--tracker", "nope"])
    assert "--tracker nope" in line
    assert not (tmp_path / "o").exists()
