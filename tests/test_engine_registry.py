"""The engine registry and its hooks: a toy engine added in one file (tests/toy_engine.py) runs
through li.run, the config check, the memory check, the theory and run_many like a built-in one."""

import pytest

import lipschitz_icl as li
from lipschitz_icl.batch import plan_groups, run_many
from lipschitz_icl.engines import KernelEngine, SampledEngine, batchable, engine_class, engine_names
from lipschitz_icl.errors import ConfigError
from lipschitz_icl.theory import theory_report

TOY = ["plugins=[toy_engine]", "engine.kind=test_meanfield", "prompt.N=8"]
SHORT = ["train.steps=30", "train.log_every=5", "train.eps=1e-9", "eval.functions=16"]
# the same objective in the built-in engine: mean-field counts, gradient steps on Q itself
KERNEL_Q = ["engine.counts=mean_field", "engine.space=Q", "prompt.N=8"]


def test_builtin_engines_are_registered_under_their_kind():
    assert engine_class("kernel") is KernelEngine and engine_class("sampled") is SampledEngine
    assert {"kernel", "sampled"} <= set(engine_names())


def test_unknown_engine_kind_names_the_field_and_the_known_engines():
    with pytest.raises(ConfigError) as e:
        li.load_config(None, ["engine.kind=magic"])
    assert e.value.field == "engine.kind" and "'magic'" in str(e.value) and "kernel, sampled" in str(e.value)


def test_toy_engine_runs_through_li_run_and_matches_the_kernel_engine():
    toy = li.run(None, [*SHORT, *TOY], write=False)
    ref = li.run(None, [*SHORT, *KERNEL_Q], write=False)
    assert toy.summary["engine"] == "test_meanfield" and toy.summary["status"] == "budget"
    loss, loss_ref = toy.series("loss"), ref.series("loss")
    # every step until T_1 (at most the first 200), then the log grid: both engines record the same steps
    assert set(range(0, 31, 5)) <= set(loss.index) and list(loss.index) == list(loss_ref.index)
    assert loss.iloc[-1] < 0.7 * loss.iloc[0]  # it trains
    assert loss.to_numpy() == pytest.approx(loss_ref.to_numpy(), rel=1e-9)  # the same objective and steps
    assert toy.attention().to_numpy() == pytest.approx(ref.attention().to_numpy(), rel=1e-9)
    assert set(toy.params) == {"Q"}


def test_toy_engine_config_hook_refuses_what_it_cannot_run():
    with pytest.raises(ConfigError) as e:
        li.load_config(None, [*TOY, "model.kind=factored", "model.init=random"])
    assert e.value.field == "model.kind"


def test_memory_check_asks_the_engine_for_its_working_set():
    li.load_config(None, [*TOY, "prompt.N=8"])  # 8 * 2^25 elements: allowed
    with pytest.raises(ConfigError) as e:
        li.load_config(None, [*TOY, "prompt.N=64"])  # 64 * 2^25 > 2^29
    assert e.value.field == "prompt.N" and "toy buffer" in str(e.value)


def test_theory_asks_the_engine_for_its_objective():
    cfg_toy = li.load_config(None, TOY)
    cfg_ref = li.load_config(None, KERNEL_Q)
    assert theory_report(cfg_toy, iters=40)["lambda_max"] == pytest.approx(
        theory_report(cfg_ref, iters=40)["lambda_max"], rel=1e-9)


def test_one_rule_decides_what_is_batched():
    cfgs = [li.load_config(None, [*SHORT, *ov]) for ov in (TOY, [], ["train.optimizer=sgd"],
                                                            ["train.optimizer=adam"], ["engine.space=Q"],
                                                            ["engine.kind=sampled"])]
    assert [batchable(c) for c in cfgs] == [False, True, True, False, False, False]
    groups, rest, _ = plan_groups(cfgs)
    assert sorted(i for g in groups for i in g) == [1, 2] and rest == [0, 3, 4, 5]
    runs = run_many(cfgs[:1])
    assert runs[0].series("loss").to_numpy() == pytest.approx(li.run(cfgs[0], write=False).series("loss").to_numpy(),
                                                             rel=0, abs=0)
