"""Factored and transformer models: shapes, attention outputs, the factored-reduced identity, per-head
metrics, finite training sets, and params.pt."""

import pytest
import torch

import lipschitz_icl as li
from lipschitz_icl.config import validate_config
from lipschitz_icl.engines import build_engine, draw_prompts, make_generator
from lipschitz_icl.engines.prompts import attention_by_feature
from lipschitz_icl.errors import ConfigError
from lipschitz_icl.models import FactoredAttention, ReducedAttention, effective_Q, make_model
from lipschitz_icl.problem import build_problem
from lipschitz_icl.store import read_params
from lipschitz_icl.transformer import ICLTransformer

B, N, d = 6, 7, 3


def _inputs(seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, N, d, generator=g, dtype=dtype), torch.randn(B, N, generator=g, dtype=dtype),
            torch.randn(B, d, generator=g, dtype=dtype))


def _models():
    g = torch.Generator().manual_seed(1)
    return {
        "reduced": ReducedAttention(d, "random", 1.0, g),
        "factored": FactoredAttention(d, 2, 0.5, g),
        "transformer": ICLTransformer(d, width=8, n_layers=2, n_heads=4, mlp=True, layernorm=True, gen=g),
        "transformer-1x1": ICLTransformer(d, width=4, gen=g),
    }


@pytest.mark.parametrize("name", list(_models()))
def test_shapes_and_attention_rows_are_distributions(name):
    model = _models()[name]
    x, y, q = _inputs()
    y_hat, attn = model(x, y, q)
    assert y_hat.shape == (B,)
    if name.startswith("transformer"):
        assert attn.shape == (B, model.n_layers, model.n_heads, N)
    else:
        assert attn.shape == (B, N)
    assert (attn >= 0).all()
    torch.testing.assert_close(attn.sum(-1), torch.ones(attn.shape[:-1], dtype=attn.dtype))
    # no positional encoding: permuting the context permutes the attention and keeps the prediction
    perm = torch.randperm(N, generator=torch.Generator().manual_seed(2))
    y_hat_p, attn_p = model(x[:, perm], y[:, perm], q)
    torch.testing.assert_close(y_hat_p, y_hat)
    torch.testing.assert_close(attn_p, attn[..., perm])
    # the prediction reads the labels
    assert not torch.allclose(model(x, y + 1.0, q)[0], y_hat)


def test_factored_with_identity_key_equals_reduced():
    """d_k = d, W_K = I and W_Q with W_Q^T W_K / sqrt(d_k) = Q^T: the reduced model's predictions."""
    g = torch.Generator().manual_seed(5)
    Q = torch.randn(d, d, generator=g, dtype=torch.float64)
    reduced = ReducedAttention(d)
    factored = FactoredAttention(d, d)
    with torch.no_grad():
        reduced.Q.copy_(Q)
        factored.W_K.copy_(torch.eye(d, dtype=torch.float64))
        factored.W_Q.copy_(d**0.5 * Q)  # W_Q^T W_K / sqrt(d) = Q^T
    x, y, q = _inputs(3)
    (a, att_a), (b, att_b) = reduced(x, y, q), factored(x, y, q)
    torch.testing.assert_close(b, a, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(att_b, att_a, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(effective_Q(factored), Q, rtol=1e-12, atol=1e-12)


def test_attention_by_feature_per_head_equals_single_head():
    g = torch.Generator().manual_seed(0)
    K = 3
    ids = torch.randint(0, K, (50, N + 1), generator=g)
    attn = torch.softmax(torch.randn(50, 2, 4, N, generator=g, dtype=torch.float64), -1)
    heads = attention_by_feature(ids, attn, K)
    assert heads.shape == (2, 4, K, K)
    for layer in range(2):
        for head in range(4):
            torch.testing.assert_close(heads[layer, head], attention_by_feature(ids, attn[:, layer, head], K))
    torch.testing.assert_close(heads.sum(-1), torch.ones(2, 4, K, dtype=torch.float64))


def test_transformer_run_records_every_layer_and_head(small_overrides):
    run = li.run(None, [*small_overrides, "engine.kind=sampled", "engine.batch=64", "model.kind=transformer",
                        "model.n_layers=2", "model.n_heads=2", "model.width=8", "train.optimizer=adam",
                        "train.lr=0.01", "train.steps=10"], write=False)
    m = run.metrics
    K = run.summary["K"]
    names = set(m.metric)
    for layer in range(2):
        for head in range(2):
            assert {f"attn_self@L{layer}H{head}", f"attn_cross@L{layer}H{head}", f"attn_min@L{layer}H{head}"} <= names
    assert "A" not in names and "B" not in names  # no merged Q for the transformer
    last = m[m.step == m.step.max()]
    per_head = [last[last.metric == f"attn_self@L1H{h}"].sort_values("k").value.to_numpy() for h in range(2)]
    mean_last_layer = last[last.metric == "attn_self"].sort_values("k").value.to_numpy()
    assert len(mean_last_layer) == K
    assert mean_last_layer == pytest.approx((per_head[0] + per_head[1]) / 2)


def test_factored_run_records_scores_of_the_effective_Q(small_overrides):
    run = li.run(None, [*small_overrides, "engine.kind=sampled", "engine.batch=64", "model.kind=factored",
                        "model.init_scale=0.3", "train.steps=20"], write=False)
    A = run.per_feature("A")
    assert A.shape[1] == run.summary["K"]
    assert A.iloc[-1].mean() > A.iloc[0].mean()  # the diagonal scores grow under training


@pytest.mark.parametrize("overrides,field", [
    (["model.kind=factored"], "engine.kind"),  # the kernel engine supports the reduced model only
    (["model.kind=factored", "engine.kind=sampled", "model.init=zero"], "model.init"),
    (["model.kind=transformer", "engine.kind=sampled", "model.n_heads=3", "model.width=8"], "model.width"),
    (["model.n_layers=2"], "model.n_layers"),
    (["model.d_k=2"], "model.d_k"),
    (["engine.train_prompts=10"], "engine.train_prompts"),
    (["engine.kind=sampled", "engine.train_prompts=10", "engine.resample=true"], "engine.resample"),
    (["engine.kind=sampled", "engine.train_prompts=0"], "engine.train_prompts"),
])
def test_model_and_engine_config_errors_name_the_field(overrides, field):
    with pytest.raises(ConfigError) as e:
        li.load_config(None, overrides)
    assert str(e.value).startswith(field)


def test_finite_training_set_trains_on_exactly_those_prompts():
    cfg = validate_config({"features": {"K": 3, "d": 3, "noise": 0.1}, "prompt": {"N": 5},
                           "engine": {"kind": "sampled", "batch": 4, "train_prompts": 10},
                           "train": {"optimizer": "sgd"}, "eval": {"functions": 8}})
    eng = build_engine(build_problem(cfg))
    ts = eng.train_set
    assert ts.x.shape == (10, 6, 3)
    seen = set()
    for _ in range(12):
        eng.forward_backward()
        idx = eng.last_index
        assert len(idx) == 4 and len(set(idx.tolist())) == 4 and 0 <= int(idx.min()) and int(idx.max()) < 10
        seen |= set(idx.tolist())
        # the gradient is that of the loss on those rows of the stored training set
        model = ReducedAttention(3)
        with torch.no_grad():
            model.Q.copy_(eng.model.Q)
        y_hat = model(ts.x[idx, :-1], ts.y[idx, :-1], ts.x[idx, -1])[0]
        (0.5 * (y_hat - ts.y[idx, -1]).square().mean()).backward()
        torch.testing.assert_close(eng.model.Q.grad, model.Q.grad)
        with torch.no_grad():
            eng.model.Q -= 0.5 * eng.model.Q.grad
    assert len(seen) > 4  # minibatches move over the set
    # full batch when batch >= M: the very same 10 prompts every step
    cfg_full = validate_config({**cfg.model_dump(mode="json"), "engine": {**cfg.engine.model_dump(), "batch": 16}})
    full = build_engine(build_problem(cfg_full))
    assert full._next_batch() is full.train_set and full._next_batch() is full.train_set
    torch.testing.assert_close(full.train_set.x, ts.x)  # drawn once, from the prompts stream


def test_finite_training_set_run_overfits_small_M(small_overrides):
    base = [*small_overrides, "engine.kind=sampled", "task.kind=relu_net", "task.L=10", "task.kernel_samples=256",
            "train.steps=150", "engine.batch=64"]
    small = li.run(None, [*base, "engine.train_prompts=4"], write=False).summary
    assert small["final_test_error"] > 3 * small["final_loss"]  # a generalisation gap on 4 prompts


@pytest.mark.parametrize("extra", [  # float64 pinned: the neural models default to float32
    ["engine.kind=sampled"],
    ["engine.kind=sampled", "model.kind=factored", "engine.dtype=float64"],
    ["engine.kind=sampled", "model.kind=transformer", "model.width=8", "model.n_heads=2", "train.optimizer=adam",
     "train.lr=0.01", "engine.dtype=float64"],
])
def test_params_pt_restores_the_trained_model(tmp_path, small_overrides, extra):
    run = li.run(None, [*small_overrides, "engine.batch=32", "train.steps=20", *extra], out=tmp_path / "r")
    state = read_params(tmp_path / "r")
    cfg = run.config
    model = make_model(cfg.model, cfg.features.d, make_generator(cfg.seed, "init"), torch.float64, "cpu")
    model.load_state_dict(state)
    # the restored model reproduces the run's final unseen-function error on its test prompts
    problem = build_problem(cfg)
    test = draw_prompts(problem.features, problem.task, cfg.prompt.N, cfg.eval.functions, 0.0,
                        make_generator(cfg.seed, "test"))
    with torch.no_grad():
        err = 0.5 * (model(test.x[:, :-1], test.y[:, :-1], test.x[:, -1])[0] - test.target).square().mean()
    assert float(err) == pytest.approx(run.summary["final_test_error"], rel=1e-9)


def test_kernel_params_reproduce_the_scores(tmp_path, small_overrides):
    run = li.run(None, [*small_overrides, "features.kind=gaussian", "features.d=8", "train.steps=30"],
                 out=tmp_path / "k")
    Q = read_params(tmp_path / "k")["Q"]
    ReducedAttention(8).load_state_dict({"Q": Q})  # fits the run's model
    problem = build_problem(run.config)
    V = problem.features.V
    S = V.T @ Q.T @ V  # scores[k, n] = v_n^T Q v_k
    A = run.per_feature("A").iloc[-1].to_numpy()
    assert torch.diagonal(S).numpy() == pytest.approx(A, rel=1e-8, abs=1e-10)
    assert abs(A).max() > 0.01


def test_params_pt_is_loaded_with_weights_only(tmp_path):
    import pickle

    from lipschitz_icl.errors import UserInputError

    (tmp_path / "summary.json").write_text("{}")

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    (tmp_path / "params.pt").write_bytes(pickle.dumps({"Q": Evil()}, protocol=2))
    with pytest.raises(UserInputError, match="params.pt"):
        read_params(tmp_path)
