"""Export to TransformerLens (interop.py, ``lipschitz-icl export``): a trained transformer run's attention patterns
(hook_pattern of every layer and head) and predictions equal the toolkit model's on the same prompts, through a
file and back; refusals are one line and exit 2. The tests that build a TransformerLens model skip without the
optional package (``pip install "lipschitz-icl[interp]"``; the test extra installs it)."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

import lipschitz_icl as li
from lipschitz_icl import interop
from lipschitz_icl.cli import app
from lipschitz_icl.errors import UserInputError
from lipschitz_icl.evaluate import load_model

cli = CliRunner()
TINY = ["features.K=3", "features.d=3", "prompt.N=8", "eval.functions=8", "seed=3"]
TRANSFORMER = [*TINY, "engine.kind=sampled", "engine.batch=32", "model.kind=transformer", "model.n_layers=2",
               "model.n_heads=2", "model.width=8", "train.optimizer=adam", "train.lr=0.05", "train.steps=20"]


def _transformer_run(tmp_path, mlp: bool = True, layernorm: bool = True, dtype: str = "float64"):
    return li.run(None, [*TRANSFORMER, f"model.mlp={mlp}", f"model.layernorm={layernorm}", f"engine.dtype={dtype}"],
                  out=tmp_path / f"t-{mlp}-{layernorm}-{dtype}")


def _prompts(dtype: torch.dtype, B: int = 16, N: int = 8, d: int = 3) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    return (torch.randn(B, N, d, generator=g, dtype=dtype), torch.randn(B, N, generator=g, dtype=dtype),
            torch.randn(B, d, generator=g, dtype=dtype))


def _toolkit_patterns(model, x_ctx, y_ctx, x_q) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The toolkit model's y_hat and every block's full attention (B, H, N+1, N): all rows, not only the query's."""
    rows: list[torch.Tensor] = []
    hooks = [b.register_forward_hook(lambda _m, _i, out: rows.append(out[1])) for b in model.blocks]
    try:
        with torch.no_grad():
            y_hat, _ = model(x_ctx, y_ctx, x_q)
    finally:
        for h in hooks:
            h.remove()
    return y_hat, rows


@pytest.mark.parametrize(("mlp", "layernorm"), [(True, True), (False, False), (True, False)])
def test_every_pattern_and_prediction_equals_the_toolkit_model_in_float64(tmp_path, mlp, layernorm):
    pytest.importorskip("transformer_lens", reason="the optional package: pip install 'lipschitz-icl[interp]'")
    run = _transformer_run(tmp_path, mlp, layernorm)
    assert abs(float(run.params["readout.bias"])) > 1e-3  # a missing readout bias would show in y_hat
    lens = interop.to_transformer_lens(run.dir)
    model = load_model(run)
    x_ctx, y_ctx, x_q = _prompts(torch.float64)
    y_hat, full = _toolkit_patterns(model, x_ctx, y_ctx, x_q)
    with torch.no_grad():
        lens_y, cache = lens.run_with_cache(x_ctx, y_ctx, x_q)
    N = x_ctx.shape[1]
    for layer in range(2):
        pattern = cache[f"blocks.{layer}.attn.hook_pattern"]  # (B, H, N+1, N+1)
        assert pattern.shape == (16, 2, N + 1, N + 1)
        torch.testing.assert_close(pattern[..., :N], full[layer], rtol=0, atol=1e-12)
        assert pattern[..., N].abs().max() == 0  # the query is never a key
    torch.testing.assert_close(lens.query_attention(cache), model(x_ctx, y_ctx, x_q)[1].detach(), rtol=0, atol=1e-12)
    torch.testing.assert_close(lens_y, y_hat, rtol=0, atol=1e-12)
    assert {"blocks.1.hook_resid_pre", "blocks.1.attn.hook_z", "blocks.1.hook_resid_post"} <= set(cache.keys())


def test_a_float32_run_matches_in_float32_and_exactly_upcast_to_float64(tmp_path):
    pytest.importorskip("transformer_lens", reason="the optional package: pip install 'lipschitz-icl[interp]'")
    run = _transformer_run(tmp_path, dtype="float32")
    model = load_model(run)
    lens32 = interop.to_transformer_lens(run)
    x_ctx, y_ctx, x_q = _prompts(torch.float32)
    with torch.no_grad():
        y_hat, attn = model(x_ctx, y_ctx, x_q)
        lens_y, cache = lens32.run_with_cache(x_ctx, y_ctx, x_q)
    # float32 rounding: the two models sum in different orders (k over N+1 rows, a masked column)
    torch.testing.assert_close(lens32.query_attention(cache), attn, rtol=0, atol=1e-5)
    torch.testing.assert_close(lens_y, y_hat, rtol=0, atol=1e-5)
    lens64 = interop.to_transformer_lens(run, dtype="float64")  # the same weights, exactly
    diff = interop.check_export(run, lens64, prompts=32)
    assert diff["dtype"] == "float64" and diff["pattern"] < 1e-12 and diff["prediction"] < 1e-12


def test_the_cli_writes_a_file_that_loads_back_to_the_same_model(tmp_path):
    pytest.importorskip("transformer_lens", reason="the optional package: pip install 'lipschitz-icl[interp]'")
    run = _transformer_run(tmp_path)
    out = tmp_path / "lens.pt"
    res = cli.invoke(app, ["export", str(run.dir), "--to", "transformer-lens", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "attention patterns within" in res.output and f"wrote {out}" in res.output
    payload = torch.load(out, weights_only=True)  # plain tensors and values: no pickled objects
    assert payload["format"] == interop.FORMAT and payload["config"]["attention_dir"] == "bidirectional"
    lens = interop.load_export(out)
    x_ctx, y_ctx, x_q = _prompts(torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(lens.predict(x_ctx, y_ctx, x_q), load_model(run)(x_ctx, y_ctx, x_q)[0],
                                   rtol=0, atol=1e-12)
        written = interop.load_export(interop.write_export(run.dir, tmp_path / "api.pt"))  # the API's file
        torch.testing.assert_close(written.predict(x_ctx, y_ctx, x_q), lens.predict(x_ctx, y_ctx, x_q), rtol=0, atol=0)
    again = cli.invoke(app, ["export", str(run.dir), "--to", "transformer-lens", "--out", str(out)])
    assert again.exit_code == 2 and "already exists (--force replaces it)" in again.output
    assert cli.invoke(app, ["export", str(run.dir), "--to", "transformer-lens", "--out", str(out),
                            "--force"]).exit_code == 0


def test_another_model_kind_is_refused_in_one_line(tmp_path):
    run = li.run(None, [*TINY, "train.steps=3", "engine.draws=8"], out=tmp_path / "reduced")
    with pytest.raises(UserInputError, match=r"^model.kind=reduced: only a transformer run .*model.kind=transformer"):
        interop.to_transformer_lens(run)
    res = cli.invoke(app, ["export", str(run.dir), "--to", "transformer-lens", "--out", str(tmp_path / "x.pt")])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    assert "model.kind=reduced" in res.output and not (tmp_path / "x.pt").exists()


def test_without_transformer_lens_the_cli_says_how_to_install_it(tmp_path, monkeypatch):
    run = _transformer_run(tmp_path)
    monkeypatch.setattr(interop, "installed", lambda: False)
    res = cli.invoke(app, ["export", str(run.dir), "--to", "transformer-lens", "--out", str(tmp_path / "x.pt")])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    assert "needs the transformer_lens package" in res.output and 'pip install "lipschitz-icl[interp]"' in res.output
    with pytest.raises(UserInputError, match=r"^to_transformer_lens needs the transformer_lens package"):
        interop.to_transformer_lens(run)


@pytest.mark.parametrize(("args", "said"), [
    (["--to", "onnx"], "--to onnx: unknown export target (allowed: transformer-lens)"),
    (["--to", "transformer-lens", "--dtype", "float16"], "--dtype float16: not a floating-point type to export in"),
])
def test_a_bad_target_or_dtype_is_one_line(tmp_path, args, said):
    run = _transformer_run(tmp_path)
    res = cli.invoke(app, ["export", str(run.dir), *args, "--out", str(tmp_path / "x.pt")])
    assert res.exit_code == 2 and said in res.output and len(res.output.strip().splitlines()) == 1
