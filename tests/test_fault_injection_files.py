"""The red team's probes against run files, feature files, the environment and reproduce (issue 20), each a
test: zeroed blocks inside metrics.parquet (S4), corrupt run files (L5), valid .npy/.csv files once refused
(L7), complex parameters (L11), hostile LIPSCHITZ_ICL_THREADS (L3), claim order on resume (L9)."""

import json
import shutil
import sys
from pathlib import Path

import fake_experiments
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from test_reproduce_resume import _claims_json
from typer.testing import CliRunner

import lipschitz_icl as li
from lipschitz_icl.cli import app, main
from lipschitz_icl.errors import UserInputError
from lipschitz_icl.experiments import registry
from lipschitz_icl.features import read_feature_file
from lipschitz_icl.store import parquet_bytes, read_metrics_table, values_digest
from lipschitz_icl.threads import cores

runner = CliRunner()
SHORT = ["train.steps=20", "train.log_every=2", "engine.draws=16", "eval.functions=16"]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run") / "r"
    li.run(None, SHORT, out=out)
    return out


def _copy(run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run, tmp_path / "r"))


def exit_2_naming(result, name: str) -> None:
    text = result.output.strip()
    assert result.exit_code == 2, text
    assert "\n" not in text and "Traceback" not in text and "unexpected" not in text, text
    assert name in text, text


# --------------------------------------------------------------------------- S4: silent corruption of metrics


def test_zeroed_blocks_inside_metrics_are_refused_never_silently_read(finished_run, tmp_path):
    run = _copy(finished_run, tmp_path)
    path = run / "metrics.parquet"
    original, good = path.read_bytes(), read_metrics_table(run)
    footer = int.from_bytes(original[-8:-4], "little") + 8  # the footer (metadata) stays intact
    refused = 0
    for offset in range(4, len(original) - footer - 64, 64):
        path.write_bytes(original[:offset] + bytes(64) + original[offset + 64:])
        try:
            table = read_metrics_table(run)
        except UserInputError as e:
            assert str(path) in str(e) and "\n" not in str(e)
            refused += 1
            continue
        assert table.equals(good), f"zeroed bytes at {offset} changed the values silently"
    assert refused > 0
    path.write_bytes(original[:200] + bytes(64) + original[264:])
    exit_2_naming(runner.invoke(app, ["analyze", str(run)]), "metrics.parquet")


def test_metrics_files_carry_the_checksum_of_their_values(finished_run, tmp_path):
    run = _copy(finished_run, tmp_path)
    table = pq.read_table(run / "metrics.parquet")
    assert b"lipschitz_icl.values_sha256" in table.schema.metadata
    changed = table.set_column(4, "value", pa.array(np.asarray(table["value"]) * (1 + 1e-12)))
    pq.write_table(changed, run / "metrics.parquet")  # re-encoded whole, the old checksum kept
    with pytest.raises(UserInputError, match="differ from the checksum"):
        read_metrics_table(run)


def test_the_checksum_takes_string_and_large_string_columns_alike():
    """pandas and Arrow hand text columns over as either type (the baselines' table came as large_string)."""
    rows = {"method": ["1-NN", "GP", None], "error": [0.5, 0.25, 1.0]}
    small = pa.table({"method": pa.array(rows["method"], pa.string()), "error": rows["error"]})
    large = pa.table({"method": pa.array(rows["method"], pa.large_string()), "error": rows["error"]})
    moved = pa.table({"method": pa.array(["1-N", "NGP", None], pa.large_string()), "error": rows["error"]})
    assert values_digest(small) == values_digest(large) != values_digest(moved)
    assert parquet_bytes(large)  # written, not refused


def test_the_checksum_of_a_dictionary_column_is_that_of_its_values():
    """A results file's config_hash column: the same values under another dictionary (order, duplicates, unused
    entries, as a parquet file may hand it back) give the same digest; other values another."""
    def digest(codes, dictionary):
        return values_digest(pa.table({"h": pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()),
                                                                          pa.array(dictionary))}))

    same = digest([0, 0, 1, 1, 1, 0], ["a", "b"])
    assert digest([1, 1, 0, 0, 0, 1], ["b", "a", "unused"]) == same
    assert digest([0, 2, 1, 1, 1, 0], ["a", "b", "a"]) == same
    assert digest([1, 1, 0, 0, 1, 1], ["b", "a"]) != same  # one value moved
    assert digest([0, 0, 1, 1, 0, 0], ["a", "b"]) != same
    assert digest([0, None, 1], ["a", "b"]) != digest([0, 1, 1], ["a", "b"])


# --------------------------------------------------------------------------- L5: corrupt run files


@pytest.mark.parametrize("damage", ["deep_array", "deep_object", "wrong_types", "metrics_schema", "metrics_strings",
                                    "config_section"])
def test_corrupt_run_files_are_exit_2_naming_the_file(finished_run, tmp_path, damage):
    run = _copy(finished_run, tmp_path)
    summary = json.loads((run / "summary.json").read_text())
    named = "summary.json"
    if damage == "deep_array":
        (run / "summary.json").write_text("[" * 100_000 + "]" * 100_000)
    elif damage == "deep_object":
        (run / "summary.json").write_text('{"a":' * 50_000 + "1" + "}" * 50_000)
    elif damage == "wrong_types":
        (run / "summary.json").write_text(json.dumps({**summary, "status": 5, "steps": "many"}))
    elif damage.startswith("metrics"):
        named = "metrics.parquet"
        table = pa.table({"a": [1, 2]}) if damage == "metrics_schema" else pa.table(
            {"step": ["a"], "metric": [1], "k": ["x"], "n": [None], "value": ["v"]})
        pq.write_table(table, run / "metrics.parquet")
    else:
        named = "config.yaml"
        config = yaml.safe_load((run / "config.yaml").read_text())
        (run / "config.yaml").write_text(yaml.safe_dump({**config, "eval": 5}))
    for command in (["analyze", str(run)], ["evaluate", str(run), "--prompts", "4"]):
        exit_2_naming(runner.invoke(app, command), named)


# --------------------------------------------------------------------------- L7: valid files once refused


def _npy_with_header(tmp_path: Path, version: tuple[int, int], pad: int) -> Path:
    """A valid .npy of format ``version`` whose header is padded to more than ``pad`` bytes."""
    arr = np.eye(3) * 2.0
    header = {"descr": "<f8", "fortran_order": False, "shape": arr.shape}
    text = repr(header) + " " * pad
    text += " " * ((-(len(text) + 1 + 12)) % 64) + "\n"
    path = tmp_path / f"v{version[0]}.npy"
    length = len(text).to_bytes(4, "little")
    path.write_bytes(b"\x93NUMPY" + bytes(version) + length + text.encode() + arr.tobytes())
    assert np.array_equal(np.load(path), arr)  # numpy itself reads it
    return path


@pytest.mark.parametrize("version,pad", [((2, 0), 400), ((3, 0), 0), ((3, 0), 1000)])
def test_valid_npy_with_long_headers_or_format_3_are_read(tmp_path, version, pad):
    arr, digest = read_feature_file(_npy_with_header(tmp_path, version, pad))
    assert np.array_equal(arr, np.eye(3) * 2.0) and len(digest) == 64


def test_a_csv_with_a_byte_order_mark_is_read(tmp_path):
    path = tmp_path / "v.csv"
    path.write_bytes("\ufeff1,0,0\n0,1,0\n0,0,1\n".encode())
    assert np.array_equal(read_feature_file(path)[0], np.eye(3))


# --------------------------------------------------------------------------- L11: complex parameters


def test_complex_parameters_are_refused_by_evaluate(finished_run, tmp_path):
    run = _copy(finished_run, tmp_path)
    state = torch.load(run / "params.pt", weights_only=True)
    torch.save({k: v.to(torch.complex128) for k, v in state.items()}, run / "params.pt")
    result = runner.invoke(app, ["evaluate", str(run), "--prompts", "4"])
    exit_2_naming(result, "params.pt")
    assert "complex128" in result.output


# --------------------------------------------------------------------------- L3: LIPSCHITZ_ICL_THREADS


def _main_with_threads(value: str, monkeypatch, capsys) -> tuple[int, str]:
    """The command line's entry (``cli.main``: the thread policy is set before the app) with ``--help``."""
    monkeypatch.setenv("LIPSCHITZ_ICL_THREADS", value)
    monkeypatch.setattr(sys, "argv", ["lipschitz-icl", "--help"])
    try:
        with pytest.raises(SystemExit) as ended:
            main()
    finally:
        torch.set_num_threads(1)
    return ended.value.code or 0, capsys.readouterr().err


@pytest.mark.parametrize("value", ["²", "0", "-3", "2.5", "four", "1e3"])
def test_a_bad_thread_count_is_one_line_exit_2(value, monkeypatch, capsys):
    code, err = _main_with_threads(value, monkeypatch, capsys)
    assert code == 2 and "Traceback" not in err, err
    assert err.strip().count("\n") == 0 and "LIPSCHITZ_ICL_THREADS" in err


@pytest.mark.parametrize("value", ["100000", "99999999999999999999"])
def test_a_thread_count_above_the_cores_is_clamped_with_a_warning(value, monkeypatch, capsys):
    code, err = _main_with_threads(value, monkeypatch, capsys)
    assert code == 0 and "Traceback" not in err, err
    assert f"using {cores()} threads" in err


# --------------------------------------------------------------------------- L9: claim order on resume


def test_claim_order_is_not_another_option_on_resume(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "_EXPERIMENTS", dict(fake_experiments.FAKE_REGISTRY))
    out = tmp_path / "out"
    first = runner.invoke(app, ["reproduce", "P3", "P1", "--quick", "--out", str(out)])
    assert first.exit_code == 0, first.output
    again = runner.invoke(app, ["reproduce", "P1", "P3", "--quick", "--out", str(out)])
    assert again.exit_code == 0, again.output
    assert "reused" in again.output


# --------------------------------------------------------------------------- L5 in reproduce: corrupt runs on resume


def test_corrupt_run_files_are_trained_again_on_resume(tmp_path, monkeypatch):
    """A resume meets run files nested 10^5 deep, ill-typed or garbage: those runs are trained again, the claims
    are the uninterrupted ones, and no experiment fails with a RecursionError in its notes."""
    monkeypatch.setattr(registry, "_EXPERIMENTS", dict(fake_experiments.FAKE_REGISTRY))
    clean, out = tmp_path / "clean", tmp_path / "out"
    for folder in (clean, out):
        assert runner.invoke(app, ["reproduce", "linear", "--quick", "--out", str(folder)]).exit_code == 0
    summaries = sorted(out.glob("runs/*/*/summary.json"))
    for path, damage in zip(summaries, ["[" * 100_000 + "]" * 100_000, '{"status": 5, "versions": 1}', "garbage"],
                            strict=False):
        path.write_text(damage)
    again = runner.invoke(app, ["reproduce", "linear", "--quick", "--out", str(out)])
    assert again.exit_code == 0, again.output
    assert "trained" in again.output and "RecursionError" not in (out / "claims.json").read_text()
    assert _claims_json(out)["claims"] == _claims_json(clean)["claims"]
