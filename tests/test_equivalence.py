"""Setting equivalence (lipschitz_icl.equivalence): for each invariance, two configs with one canonical
shape train the same trajectory once their time scales are matched (to 1e-9), and configs of different
shapes do not; the grouping names the invariance that made each copy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import lipschitz_icl as li
from lipschitz_icl import TaskClass, register_task
from lipschitz_icl.equivalence import group_settings, setting_form
from lipschitz_icl.tasks import make_task

# exact counts law (mean field) and every step recorded: trajectories are deterministic and comparable
BASE = ["engine.counts=mean_field", "train.steps=150", "train.log_every=1", "train.eps=1e-12", "eval.functions=8"]


@register_task
class LinearOffset(TaskClass):
    """f(x) = w^T x + b, w uniform on the sphere of radius L, b ~ N(0, offset^2): Sigma = L^2/d G + offset^2 1 1^T
    exactly, the linear class's Sigma plus u 1^T + 1 u^T (u = offset^2/2 1). Still L-Lipschitz."""

    name = "test_linear_offset"
    defaults = {"offset": 1.0}
    rotation_invariant = True

    def sample(self, n, gen, dtype, device="cpu"):
        w = torch.randn(n, self.d, generator=gen, dtype=dtype)
        return {"w": self.L * w / w.norm(dim=1, keepdim=True),
                "b": self.params["offset"] * torch.randn(n, generator=gen, dtype=dtype)}

    def evaluate(self, funcs, x):
        return torch.einsum("nmd,nd->nm", x, funcs["w"]) + funcs["b"].unsqueeze(1)

    def exact_kernel(self, V):
        K = V.shape[1]
        return (self.L**2 / self.d) * (V.T @ V) + self.params["offset"] ** 2 * torch.ones(K, K, dtype=V.dtype)


def _cfg(*extra: str) -> li.Config:
    return li.load_config(None, [*BASE, *extra])


def _matched(a: li.Config, b: li.Config) -> li.Config:
    """``b`` with its step size set so that its time scale equals ``a``'s."""
    fa, fb = setting_form(a), setting_form(b)
    return b.with_overrides([f"train.lr={b.train.lr * fa.rate / fb.rate!r}"])


def _trajectory(cfg: li.Config) -> np.ndarray:
    run = li.run(cfg, write=False)
    loss = run.series("loss").to_numpy()
    return np.stack([loss / loss[0], run.series("attn_min").to_numpy()])


def _features_file(tmp_path, V: np.ndarray, name: str) -> str:
    path = tmp_path / f"{name}.npy"
    np.save(path, V.T)  # K rows of d numbers
    return str(path)


GAUSS = ["features.kind=gaussian", "features.K=4", "features.d=6"]
CASES = {  # invariance -> (config a, config b), b a copy of a
    "eta L^2": (["task.L=2"], ["task.L=0.5"]),
    "Sigma mod u1^T + 1u^T": ([], ["task.kind=test_linear_offset"]),
    "feature rescaling": ([*GAUSS], [*GAUSS, "features.scale=2"]),
    "symmetric features": ([], ["features.kind=simplex"]),
    "N under mean-field counts": ([], ["prompt.N=20"]),
}


@pytest.mark.parametrize("invariance", list(CASES))
def test_one_shape_is_one_trajectory_in_rescaled_time(invariance):
    a, b = (_cfg(*extra) for extra in CASES[invariance])
    fa, fb = setting_form(a), setting_form(b)
    assert fa.same_shape(fb) and fa.fingerprint == fb.fingerprint
    np.testing.assert_allclose(_trajectory(_matched(a, b)), _trajectory(a), rtol=1e-9, atol=1e-12)
    (group,) = group_settings([("a", fa), ("b", fb)])
    assert group.members == ["a", "b"] and group.copies_by[0]


def test_a_permutation_of_the_features_is_one_trajectory(tmp_path):
    gen = np.random.default_rng(3)
    V = gen.standard_normal((6, 4))
    V /= np.linalg.norm(V, axis=0)
    probs = [0.4, 0.3, 0.2, 0.1]
    perm = [2, 0, 3, 1]
    a = _cfg("features.kind=file", f"features.path={_features_file(tmp_path, V, 'a')}", f"features.probs={probs}")
    b = _cfg("features.kind=file", f"features.path={_features_file(tmp_path, V[:, perm], 'b')}",
             f"features.probs={[probs[i] for i in perm]}")
    fa, fb = setting_form(a), setting_form(b)
    assert fa.same_run(fb) and "permutation" in group_settings([("a", fa), ("b", fb)])[0].copies_by[0]
    np.testing.assert_allclose(_trajectory(b), _trajectory(a), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("other", [
    [*GAUSS],  # a generic geometry
    ["task.kind=aniso_linear"],  # a class whose law is not rotation-invariant
    ["features.probs=imbalanced"],  # non-uniform p
    ["task.label_noise=0.5"],  # label noise: tau^2 / s_C
    ["prompt.N=20", "engine.counts=multinomial", "engine.draws=64"],  # N matters once counts vary
])
def test_different_shapes_train_different_trajectories(other):
    a, b = _cfg("features.K=4", "features.d=6"), _cfg("features.K=4", "features.d=6", *other)
    fa, fb = setting_form(a), setting_form(b)
    assert not fa.same_shape(fb) and fa.fingerprint != fb.fingerprint
    ta, tb = _trajectory(a), _trajectory(_matched(a, b))
    assert np.max(np.abs(ta - tb)) > 1e-3  # matched time scales, yet the curves part


def test_forms_of_monte_carlo_classes_on_symmetric_features_are_the_populations():
    # relu_net's Sigma is a Monte-Carlo estimate, not exactly a I + b 1 1^T; its law is rotation-invariant, so the
    # population setting is the linear class's: one shape (the estimate's noise is not a difference)
    forms = [(k, setting_form(_cfg(f"task.kind={k}"))) for k in ("linear", "relu_net", "rbf", "sinusoid", "norm")]
    (group,) = group_settings(forms)
    assert len(group.members) == 5
    assert not setting_form(_cfg("task.kind=aniso_linear")).same_shape(forms[0][1])


def test_the_anisotropic_class_is_l_lipschitz_and_not_symmetric():
    task = make_task("aniso_linear", 3.0, 5)
    funcs = task.sample(64, torch.Generator().manual_seed(0), torch.float64)
    torch.testing.assert_close(task.lipschitz(funcs), torch.full((64,), 3.0, dtype=torch.float64))
    sigma = task.kernel(torch.eye(5, dtype=torch.float64), torch.Generator().manual_seed(1), 4096).sigma
    assert sigma[0, 0] > 2 * sigma[4, 4]  # the first axis carries more of f than the last
