"""The sampled engine trains neural models (factored, transformer) in float32 unless
engine.dtype says otherwise; the paper's reduced model and the kernel engine stay float64."""

from __future__ import annotations

import pytest

import lipschitz_icl as li

TINY = ["features.K=3", "features.d=3", "prompt.N=8", "train.steps=3", "engine.batch=16", "eval.functions=8"]
SAMPLED = [*TINY, "engine.kind=sampled", "model.init=random"]


@pytest.mark.parametrize("kind", ["factored", "transformer"])
def test_neural_models_default_to_float32(kind):
    cfg = li.load_config(None, [*SAMPLED, f"model.kind={kind}", "model.width=8"] if kind == "transformer"
                         else [*SAMPLED, f"model.kind={kind}"])
    assert cfg.engine.dtype == "float32"
    run = li.run(cfg, write=False)
    assert {str(t.dtype) for t in run.params.values()} == {"torch.float32"}


def test_float64_stays_available_for_neural_models():
    cfg = li.load_config(None, [*SAMPLED, "model.kind=factored", "engine.dtype=float64"])
    assert cfg.engine.dtype == "float64"
    assert {str(t.dtype) for t in li.run(cfg, write=False).params.values()} == {"torch.float64"}


@pytest.mark.parametrize("overrides", [TINY, SAMPLED])
def test_reduced_model_and_kernel_engine_stay_float64(overrides):
    assert li.load_config(None, overrides).engine.dtype == "float64"


def test_resolved_default_round_trips_through_the_written_config(tmp_path):
    cfg = li.load_config(None, [*SAMPLED, "model.kind=factored"])
    (tmp_path / "c.yaml").write_text(cfg.to_yaml())
    explicit = li.load_config(None, [*SAMPLED, "model.kind=factored", "engine.dtype=float32"])
    assert li.load_config(tmp_path / "c.yaml").config_hash() == cfg.config_hash() == explicit.config_hash()
