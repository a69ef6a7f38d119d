"""Feature sets and task classes: geometry, files, and certified Lipschitz bounds."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lipschitz_icl.config import FeaturesConfig, validate_config
from lipschitz_icl.engines import make_generator
from lipschitz_icl.errors import ConfigError
from lipschitz_icl.features import make_features
from lipschitz_icl.tasks import make_task, task_names

GEN = make_generator(0, "test")


def test_orthonormal_gaussian_simplex_geometry():
    fs = make_features(FeaturesConfig(kind="orthonormal", K=3, d=6), GEN)
    torch.testing.assert_close(fs.gram, torch.eye(3, dtype=torch.float64))
    assert fs.delta_sep == pytest.approx(math.sqrt(2))
    fs = make_features(FeaturesConfig(kind="gaussian", K=7, d=4), GEN)
    torch.testing.assert_close(fs.V.norm(dim=0), torch.ones(7, dtype=torch.float64))
    fs = make_features(FeaturesConfig(kind="simplex", K=5, d=4), GEN)
    D = fs.distances[~torch.eye(5, dtype=torch.bool)]
    assert D.min() == pytest.approx(float(D.max()))  # all pairs equally far apart
    torch.testing.assert_close(fs.V.sum(1), torch.zeros(4, dtype=torch.float64), atol=1e-12, rtol=0)


def test_probabilities():
    fs = make_features(FeaturesConfig(K=4, d=4, probs="imbalanced", p_max=0.7), GEN)
    assert fs.p.tolist() == pytest.approx([0.7, 0.1, 0.1, 0.1])
    fs = make_features(FeaturesConfig(K=2, d=2, probs=[0.25, 0.75]), GEN)
    assert fs.p.tolist() == [0.25, 0.75]
    ids = fs.sample_ids((20000,), make_generator(1, "ids"))
    assert float((ids == 1).double().mean()) == pytest.approx(0.75, abs=0.02)


def test_token_noise_has_variance_sigma2_over_d():
    fs = make_features(FeaturesConfig(K=2, d=8, noise=0.5), GEN)
    x = fs.tokens(torch.zeros(20000, dtype=torch.long), make_generator(2, "tok"))
    resid = x - fs.V[:, 0]
    assert float(resid.var(0).mean()) == pytest.approx(0.25 / 8, rel=0.05)


def test_feature_files(tmp_path):
    arr = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 3.0], [1.0, 1.0, 1.0]])
    np.save(tmp_path / "f.npy", arr)
    np.savetxt(tmp_path / "f.csv", arr, delimiter=",")
    for name in ("f.npy", "f.csv"):
        cfg = validate_config({"features": {"kind": "file", "path": str(tmp_path / name)}})
        assert (cfg.features.K, cfg.features.d) == (4, 3)
        fs = make_features(cfg.features, GEN)
        np.testing.assert_allclose(fs.V.T.numpy(), arr)
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "text.csv").write_text("a,b\nc,d\n")
    np.save(tmp_path / "vec.npy", np.ones(3))
    for bad in ("obj.npy", "empty.csv", "text.csv", "vec.npy"):
        with pytest.raises(ConfigError) as info:
            validate_config({"features": {"kind": "file", "path": str(tmp_path / bad)}})
        assert info.value.field == "features.path"


@settings(max_examples=30, deadline=None)
@given(kind=st.sampled_from(["linear", "relu_net", "rbf", "sinusoid", "norm"]),
       L=st.floats(0.05, 50), d=st.integers(1, 8), seed=st.integers(0, 2**31))
def test_functions_respect_their_lipschitz_bound(kind, L, d, seed):
    """|f(x) - f(y)| <= L ||x - y|| on random pairs, and the certified bound is at most L."""
    gen = make_generator(seed, "lip")
    task = make_task(kind, L, d)
    funcs = task.sample(16, gen, torch.float64)
    x = torch.randn(16, 64, d, generator=gen, dtype=torch.float64)
    y = x + 0.3 * torch.randn(16, 64, d, generator=gen, dtype=torch.float64)
    diff = (task.evaluate(funcs, x) - task.evaluate(funcs, y)).abs()
    assert torch.all(diff <= L * (x - y).norm(dim=-1) * (1 + 1e-9) + 1e-12)
    assert torch.all(task.lipschitz(funcs) <= L * (1 + 1e-9))


def test_sampling_is_reproducible_from_the_generator():
    for kind in task_names():
        task = make_task(kind, 1.0, 3)
        a = task.sample(4, make_generator(5, "s"), torch.float64)
        b = task.sample(4, make_generator(5, "s"), torch.float64)
        for key in a:
            torch.testing.assert_close(a[key], b[key])
