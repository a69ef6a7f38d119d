"""Bad input, fuzzed: >= 500 malformed configs through ``lipschitz-icl run CONFIG.yaml``.

Every one must end with exit code 2 and ONE line on stderr naming the field or file, no traceback,
and no output directory. A config that is accepted by mistake is caught before anything is trained
(``prepare_run_dir`` is replaced by a tripwire), so a missed check fails fast instead of running.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
import yaml
from fuzz_support import FUZZED, dump, fuzz, refuse  # shared with test_fuzz_text.py
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from lipschitz_icl.config import Config

MIN_TOTAL = 500
STRATEGIES = {"wrong type", "unknown key", "missing key", "out of range", "nan/inf", "huge size", "malformed YAML",
              "non-UTF-8", "feature file", "bad override"}

# --------------------------------------------------------------------------- the config's fields


def _leaves(model: type[BaseModel] = Config, prefix: tuple[str, ...] = ()) -> dict[str, object]:
    out = {}
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out.update(_leaves(ann, (*prefix, name)))
        else:
            out[".".join((*prefix, name))] = field
    return out


LEAVES = _leaves()
SECTIONS = [n for n, f in Config.model_fields.items() if isinstance(f.annotation, type)
            and issubclass(f.annotation, BaseModel)]
INTS = [k for k, f in LEAVES.items() if f.annotation is int]
FLOATS = [k for k, f in LEAVES.items() if f.annotation is float]
LITERALS = [k for k, f in LEAVES.items() if str(f.annotation).startswith("typing.Literal")]
assert len(INTS) >= 8 and len(FLOATS) >= 12 and len(LITERALS) >= 9


def bounds(path: str) -> dict[str, float]:
    out = {}
    for m in LEAVES[path].metadata:
        for key in ("ge", "gt", "le", "lt"):
            if getattr(m, key, None) is not None:
                out[key] = getattr(m, key)
    return out


def nest(path: str, value) -> dict:
    data: dict = {}
    node = data
    parts = path.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return data


def merge(base: dict, extra: dict) -> dict:
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


# valid settings mixed into the configs, so malformed values meet varied surroundings
VALID = st.fixed_dictionaries({}, optional={
    "seed": st.integers(0, 1000),
    "task": st.fixed_dictionaries({}, optional={"L": st.floats(0.1, 10), "kind": st.sampled_from(["linear", "norm"])}),
    "train": st.fixed_dictionaries({}, optional={"steps": st.integers(1, 50), "lr": st.floats(0.01, 2)}),
    "engine": st.fixed_dictionaries({}, optional={"draws": st.integers(1, 32)}),
    "features": st.fixed_dictionaries({}, optional={"noise": st.floats(0, 1)}),
})

WORDS = st.from_regex(r"[a-z][a-z_]{1,12}", fullmatch=True).filter(
    lambda w: w not in {"inf", "nan", "infinity", "true", "false", "yes", "no", "on", "off", "null", "none",
                        "y", "n", "uniform", "imbalanced"})
JUNK = st.one_of(
    WORDS,
    st.lists(st.integers(), min_size=1, max_size=3),
    st.dictionaries(WORDS, st.integers(), min_size=1, max_size=2),
)


def wrong_value(path: str):
    ann = LEAVES[path].annotation
    if ann is int or ann == int | None:  # optional ints (model.d_k, engine.train_prompts) refuse the same junk
        return st.one_of(JUNK, st.booleans(), st.floats(0.1, 1e6).filter(lambda x: not x.is_integer()))
    if ann is float:
        return st.one_of(JUNK, st.booleans())
    if path in LITERALS:
        allowed = set(LEAVES[path].annotation.__args__)
        return st.one_of(WORDS.filter(lambda w: w not in allowed), st.integers(), st.lists(WORDS, min_size=1))
    if path in ("name", "features.path", "features.file_sha256", "eval.other_class", "task.kind", "engine.kind"):
        return st.one_of(st.integers(), st.lists(WORDS, min_size=1), st.dictionaries(WORDS, WORDS, min_size=1))
    if ann is bool:  # model.mlp, model.layernorm
        return st.one_of(WORDS, st.integers(2, 100), st.lists(st.booleans(), min_size=1))
    if path in ("engine.resample", "eval.geometry"):
        return st.one_of(WORDS, st.integers(2, 100), st.lists(st.booleans(), min_size=1))
    if path == "plugins":
        return st.one_of(WORDS, st.integers(), st.lists(st.integers(), min_size=1), st.dictionaries(WORDS, WORDS))
    if path == "features.probs":
        return st.one_of(WORDS, st.integers(), st.lists(WORDS, min_size=1), st.dictionaries(WORDS, WORDS))
    if path == "features.cov":  # a list of rows of numbers
        return st.one_of(WORDS, st.integers(), st.lists(WORDS, min_size=1), st.lists(st.lists(WORDS, min_size=1),
                                                                                    min_size=1))
    if path == "task.params":
        return st.one_of(WORDS, st.integers(), st.lists(st.integers(), min_size=1))
    raise AssertionError(path)


# --------------------------------------------------------------------------- 1. wrong types


@fuzz(70)
@given(data=st.data(), base=VALID)
def test_wrong_types(data, base):
    path = data.draw(st.sampled_from(sorted(LEAVES)))
    value = data.draw(wrong_value(path))
    cfg = merge(base, nest(path, value))
    line = refuse({"c.yaml": dump(cfg)}, ["c.yaml"], [path], "wrong type")
    assert line.startswith((f"error: {path}:", f"error: {path}."))  # a list's element is named by its index


@fuzz(20)
@given(section=st.sampled_from(SECTIONS), value=st.one_of(JUNK.filter(lambda v: not isinstance(v, dict)),
                                                         st.integers(), st.none()))
def test_sections_that_are_not_sections(section, value):
    line = refuse({"c.yaml": dump({section: value})}, ["c.yaml"], [section], "wrong type")
    assert "section" in line or "should" in line


# --------------------------------------------------------------------------- 2. unknown and missing keys

ODD_KEYS = st.one_of(
    WORDS, st.text(min_size=1, max_size=12), st.integers(), st.booleans(),
    st.sampled_from(["[/x]", "[bold]", "a\nb", "\x1b[31mred", "a\rb", "\u2028", "../etc", "key: value"]),
)


@fuzz(60)
@given(data=st.data(), base=VALID)
def test_unknown_keys(data, base):
    section = data.draw(st.sampled_from(["", *SECTIONS]))
    allowed = set(Config.model_fields) if not section else set(Config.model_fields[section].annotation.model_fields)
    key = data.draw(ODD_KEYS.filter(lambda k: k not in allowed and k is not None))
    cfg = merge(base, {key: 1} if not section else {section: {key: 1}})
    expect = [section + "."] if section else ["unknown key", "Keys should be strings"]
    line = refuse({"c.yaml": dump(cfg)}, ["c.yaml"], expect, "unknown key")
    assert "unknown key" in line or "should be" in line


@fuzz(25)
@given(base=VALID, data=st.data())
def test_missing_and_null_values(base, data):
    path = data.draw(st.sampled_from([p for p in sorted(LEAVES) if LEAVES[p].annotation in (int, float)]
                                     + ["features.path", "task.kind", "features.probs"]))
    if path == "features.path":  # kind=file without a path
        cfg, expect = merge(base, {"features": {"kind": "file"}}), ["features.path"]
    else:
        cfg, expect = merge(base, nest(path, None)), [path]
    refuse({"c.yaml": dump(cfg)}, ["c.yaml"], expect, "missing key")


# --------------------------------------------------------------------------- 3. out of range, NaN, inf


def out_of_range(path: str):
    b = bounds(path)
    is_int = LEAVES[path].annotation is int
    options = []
    if "ge" in b:
        options.append(st.integers(-10**6, int(b["ge"]) - 1) if is_int else st.floats(-1e6, b["ge"], exclude_max=True))
    if "gt" in b:
        options.append(st.integers(-10**6, int(b["gt"])) if is_int else st.floats(-1e6, b["gt"]))
    if "le" in b:
        options.append(st.integers(int(b["le"]) + 1, int(b["le"]) * 10 + 10) if is_int
                       else st.floats(b["le"], 1e300, exclude_min=True))
    if "lt" in b:
        options.append(st.floats(b["lt"], 1e6))
    return st.one_of(options)


RANGED = [p for p in INTS + FLOATS if bounds(p)]


@fuzz(70)
@given(data=st.data(), base=VALID)
def test_out_of_range(data, base):
    path = data.draw(st.sampled_from(RANGED))
    value = data.draw(out_of_range(path))
    line = refuse({"c.yaml": dump(merge(base, nest(path, value)))}, ["c.yaml"], [path], "out of range")
    assert line.startswith(f"error: {path}:")


CROSS = st.one_of(
    st.integers(6, 40).map(lambda K: ({"features": {"K": K, "d": 5}}, "features.K")),  # orthonormal K > d
    st.integers(8, 40).map(lambda K: ({"features": {"kind": "simplex", "K": K, "d": 5}}, "features.K")),
    st.lists(st.floats(0, 1), min_size=5, max_size=5).filter(lambda p: abs(sum(p) - 1) > 1e-3).map(
        lambda p: ({"features": {"probs": p}}, "features.probs")),
    st.integers(2, 9).filter(lambda n: n != 5).map(
        lambda n: ({"features": {"probs": [1.0 / n] * n}}, "features.probs")),
    st.floats(-1, -1e-9).map(lambda x: ({"features": {"probs": [x, 1 - x, 0, 0, 0]}}, "features.probs")),
    st.tuples(st.sampled_from(["width", "bias"]), st.floats(-1e3, 0)).map(
        lambda kv: ({"task": {"kind": "relu_net", "params": {kv[0]: kv[1]}}}, f"task.params.{kv[0]}")),
    st.tuples(st.sampled_from(["centers", "width", "spread"]), st.floats(1e7, 1e300)).map(
        lambda kv: ({"task": {"kind": "rbf", "params": {kv[0]: kv[1]}}}, f"task.params.{kv[0]}")),
    WORDS.map(lambda k: ({"task": {"kind": "sinusoid", "params": {k: 1}}}, "task.params.")),
    WORDS.map(lambda k: ({"task": {"kind": f"no_such_{k}"}}, "task.kind")),
    WORDS.map(lambda k: ({"eval": {"other_class": f"no_such_{k}"}}, "eval.other_class")),
    WORDS.map(lambda k: ({"plugins": [f"no_such_module_{k}"]}, "plugins")),
    st.sampled_from(["../x", "/abs", "a/b", "..", ".hidden", "a b", "x" * 129, "", "a\\b", "-x"]).map(
        lambda n: ({"name": n}, "name")),
    st.sampled_from(["os;rm", "a..b", "../up", "a/b", "1abc", ""]).map(lambda m: ({"plugins": [m]}, "plugins")),
    st.just(({"task": {"params": {"width": "wide"}, "kind": "relu_net"}}, "task.params.width")),
    st.floats(3.5e38, 1e300).map(lambda lr: ({"engine": {"dtype": "float32"}, "train": {"lr": lr}}, "train.lr")),
    st.just(({"task": {"params": {"width": float("nan")}, "kind": "relu_net"}}, "task.params.width")),
)


@fuzz(50)
@given(case=CROSS, base=VALID)
def test_inconsistent_values(case, base):
    cfg, field = case
    base = {k: v for k, v in base.items() if k not in cfg}
    refuse({"c.yaml": dump(merge(base, cfg))}, ["c.yaml"], [field], "out of range")


@fuzz(50)
@given(data=st.data(), base=VALID, bad=st.sampled_from([".nan", ".inf", "-.inf", ".NaN", "nan", "inf", "-inf"]))
def test_nan_and_inf(data, base, bad):
    path = data.draw(st.sampled_from(INTS + FLOATS + ["features.probs"]))
    cfg = merge(base, nest(path, "__BAD__"))
    text = yaml.safe_dump(cfg, sort_keys=False)
    literal = f"[{bad}, 0.25, 0.25, 0.25, 0.25]" if path == "features.probs" else bad
    text = text.replace("__BAD__", literal)
    line = refuse({"c.yaml": text.encode()}, ["c.yaml"], [path], "nan/inf")
    assert line.startswith(f"error: {path}:")


# --------------------------------------------------------------------------- 4. huge sizes

HUGE = st.one_of(
    st.tuples(st.sampled_from(INTS), st.integers(10**8, 10**30)).filter(lambda t: t[1] > bounds(t[0]).get("le", 1e40)
                                                                        ).map(lambda t: (nest(*t), [t[0]])),
    st.integers(2**63, 2**70).map(lambda s: ({"seed": s}, ["seed"])),
    st.integers(8_200, 100_000).map(  # Sigma is K x K
        lambda K: ({"features": {"kind": "gaussian", "K": K, "d": 2}}, ["features.K", "engine.draws"])),
    st.tuples(st.integers(50_000, 100_000), st.integers(50_000, 1_000_000)).map(  # V is K x d
        lambda t: ({"features": {"kind": "gaussian", "K": t[0], "d": t[1]}},
                   ["features.d", "features.K", "engine.draws"])),  # engine.draws: a step's K^3 per draw
    st.tuples(st.integers(10**5, 10**7), st.integers(10**4, 10**5)).map(  # a batch of prompts
        lambda t: ({"engine": {"kind": "sampled", "batch": t[0]}, "prompt": {"N": t[1]}}, ["engine.batch"])),
    st.tuples(st.integers(10**5, 10**6), st.integers(10**4, 10**5)).map(  # the test prompts
        lambda t: ({"engine": {"kind": "sampled", "batch": 1}, "eval": {"functions": t[0]},
                    "prompt": {"N": t[1]}}, ["eval.functions"])),
    st.integers(10**7 // 2, 10**7).map(  # count draws: draws x K and draws x N
        lambda B: ({"engine": {"draws": B}, "features": {"K": 300, "d": 300}}, ["engine.draws"])),
    st.integers(10**7, 10**8).map(  # recorded rows
        lambda T: ({"train": {"steps": T, "log_every": 1}}, ["train.log_every"])),
    st.integers(10**5, 10**6).map(  # a wide task class
        lambda h: ({"task": {"kind": "relu_net", "params": {"width": h}}, "engine": {"kind": "sampled"},
                    "prompt": {"N": 1000}}, ["engine.batch"])),
    st.integers(10**6, 10**7).map(  # the Monte-Carlo kernel (refused when the kernel is about to be drawn)
        lambda M: ({"task": {"kind": "relu_net", "kernel_samples": M, "params": {"width": 256}},
                    "eval": {"functions": 1}, "features": {"K": 5, "d": 200}}, ["task.kernel_samples"])),
)


@fuzz(45)
@given(case=HUGE)
def test_huge_sizes_are_refused_before_allocation(case):
    cfg, fields = case
    refuse({"c.yaml": dump(cfg)}, ["c.yaml"], fields, "huge size")


# --------------------------------------------------------------------------- 5. malformed YAML, bytes

BROKEN_YAML = [
    "task: {L: 1", "task: [1, 2", "task:\n  L: 1\n kind: linear", "a: 'unclosed", 'a: "unclosed', "\tseed: 1",
    "seed: 1\n\t- x", "task: L: 1", "*undefined_alias", "seed: *nope", "? [a, b]\n: 1", "- a\nb: 1",
    "%YAML 9.9\n---\nseed: 1", "{seed: 1}}", "seed: 1\n...\n---\nseed: 2", "[[[[[[", "seed: @x", "seed: `x",
    "!!python/object/apply:os.system ['echo hacked']", "seed: !!python/object/apply:os.getpid []",
    "task: !!python/name:os.system", "!!python/object:builtins.dict {}", "seed: !!float nope",
    "seed: !custom 1", "&a [*a]", "seed: 1\n\x00", "task:\n  - L: 1\n  L: 2",
]
LOL = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True)) + "task: {params: *i}\n"


@fuzz(60)
@given(fragment=st.sampled_from(BROKEN_YAML), prefix=VALID, suffix=st.sampled_from(["", "\n", "\n# end\n"]))
def test_malformed_yaml(fragment, prefix, suffix):
    text = (yaml.safe_dump(prefix) if prefix else "") + fragment + suffix
    data = None
    with contextlib.suppress(yaml.YAMLError):
        data = yaml.safe_load(text)
    if isinstance(data, dict):  # parsed after all: it must still be refused as a config
        refuse({"c.yaml": text.encode()}, ["c.yaml"], ["c.yaml", "seed", "task", "config", "."], "malformed YAML")
    else:
        refuse({"c.yaml": text.encode()}, ["c.yaml"], ["c.yaml"], "malformed YAML")


@fuzz(40)
@given(text=st.text(max_size=60))
def test_random_text_that_is_not_a_mapping(text):
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        data = "unparseable"
    if data is None or isinstance(data, dict):  # empty (defaults) or a mapping: covered elsewhere
        text = f"[{text!r}"
    refuse({"c.yaml": text.encode("utf-8", "surrogatepass")}, ["c.yaml"], ["c.yaml"], "malformed YAML")


def test_yaml_alias_bomb_is_refused_quickly():
    line = refuse({"c.yaml": LOL.encode()}, ["c.yaml"], ["c.yaml"], "malformed YAML")
    assert "values" in line


def test_deep_nesting_is_refused():
    refuse({"c.yaml": ("task: {params: {x: " + "[" * 500 + "]" * 500 + "}}").encode()}, ["c.yaml"],
           ["c.yaml"], "malformed YAML")


BAD_BYTES = [b"\xff", b"\xfe", b"\x80", b"\xc3\x28", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf8\x88\x80\x80\x80", b"\xe2\x82"]


@fuzz(40)
@given(base=VALID, bad=st.lists(st.sampled_from(BAD_BYTES), min_size=1, max_size=3), where=st.floats(0, 1),
       utf16=st.booleans())
def test_non_utf8_bytes(base, bad, where, utf16):
    text = yaml.safe_dump(base or {"seed": 1})
    if utf16:
        data = text.encode("utf-16")
    else:
        raw = text.encode()
        i = int(where * len(raw))
        data = raw[:i] + b"".join(bad) + raw[i:]
    line = refuse({"c.yaml": data}, ["c.yaml"], ["c.yaml"], "non-UTF-8")
    assert "UTF-8" in line


# --------------------------------------------------------------------------- 6. feature files


def _npy(arr, allow_pickle=False) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=allow_pickle)
    return buf.getvalue()


def _npy_header_only(shape) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": shape})
    return buf.getvalue() + b"\x00" * 64


FEATURE_FILES = st.one_of(
    st.just(("f.npy", b"")),
    st.just(("f.csv", b"")),
    st.binary(max_size=80).map(lambda b: ("f.npy", b)),
    st.integers(1, 60).map(lambda n: ("f.npy", _npy(np.eye(4))[:n])),  # truncated
    st.integers(1, 6).map(lambda n: ("f.npy", _npy(np.arange(float(n))))),  # 1-D
    st.integers(1, 4).map(lambda n: ("f.npy", _npy(np.ones((2, n, 2))))),  # 3-D
    st.integers(1, 6).map(lambda d: ("f.npy", _npy(np.ones((1, d))))),  # K = 1
    st.integers(0, 6).map(lambda d: ("f.npy", _npy(np.ones((0, d))))),  # K = 0
    st.just(("f.npy", _npy(np.ones((3, 0))))),  # d = 0
    st.just(("f.npy", _npy(np.array([[1, None], [2, 3]], dtype=object), allow_pickle=True))),  # pickled
    st.just(("f.npy", _npy(np.array([{"a": 1}, {"b": 2}], dtype=object), allow_pickle=True))),
    st.just(("f.npy", b"\x80\x04\x95" + b"\x00" * 20)),  # a raw pickle stream
    st.just(("f.npy", _npy(np.eye(3, dtype=complex)))),
    st.just(("f.npy", _npy(np.eye(3, dtype=bool)))),
    st.just(("f.npy", _npy(np.array([["a", "b"], ["c", "d"]])))),
    st.just(("f.npy", _npy(np.zeros((3,), dtype=[("x", "f8"), ("y", "f8")])))),
    st.sampled_from([np.nan, np.inf, -np.inf]).map(lambda v: ("f.npy", _npy(np.array([[1.0, v], [0.0, 1.0]])))),
    st.integers(2, 6).map(lambda K: ("f.npy", _npy(np.ones((K, 3))))),  # every v_k the same
    st.tuples(st.integers(10**5, 10**7), st.integers(10**4, 10**6)).map(
        lambda s: ("f.npy", _npy_header_only(s))),  # a huge shape in the header
    st.text(alphabet="abcxyz ,;", min_size=1, max_size=30).map(lambda t: ("f.csv", t.encode())),
    st.just(("f.csv", b"1,2,3\n4,5\n")),  # ragged
    st.just(("f.csv", b"1,2\n")),  # one row
    st.just(("f.csv", b"1,nan\n0,1\n")),
    st.just(("f.csv", b"1,2\n\xff\xfe,3\n")),
    st.just(("f.csv", b"1,0\n1,0\n")),  # duplicates
    st.sampled_from(["f.txt", "f.pkl", "f.json", "f", "f.npz"]).map(lambda n: (n, _npy(np.eye(3)))),
    st.just(("missing.npy", None)),
    st.just(("dir.npy", "DIR")),
)


@fuzz(80)
@given(case=FEATURE_FILES, give_shape=st.booleans())
def test_bad_feature_files(case, give_shape):
    name, content = case
    files = {}
    if isinstance(content, bytes):
        files[name] = content
    elif content == "DIR":
        files[f"{name}/x"] = b""
    features = {"kind": "file", "path": name}
    if give_shape:
        features["d"] = 999  # a shape that cannot match, when the file itself is fine
    files["c.yaml"] = dump({"features": features})
    refuse(files, ["c.yaml"], ["features.path", "features:", "features.d", "features.K"], "feature file")


# --------------------------------------------------------------------------- 7. bad overrides (argv)

OVERRIDES = st.one_of(
    WORDS,  # no '='
    WORDS.map(lambda w: f"={w}"),
    WORDS.map(lambda w: f"task..{w}=1"),
    WORDS.map(lambda w: f"task.{w}."),
    st.sampled_from(["task.L=[", "task.L={", "task.L='x", "task.L=@", "seed=`", "task.L=\x00"]),
    st.sampled_from(sorted(LEAVES)).map(lambda p: f"{p}.sub=1" if LEAVES[p].annotation in (int, float) else
                                        f"{p}=[[[1]]]"),
    st.sampled_from(INTS + FLOATS).map(lambda p: f"{p}="),
    st.sampled_from(INTS + FLOATS).map(lambda p: f"{p}=true"),
)


@fuzz(40)
@given(override=OVERRIDES, with_file=st.booleans())
def test_bad_overrides(override, with_file):
    files = {"c.yaml": b"seed: 1\n"} if with_file else {}
    args = (["c.yaml"] if with_file else []) + [override]
    key = override.partition("=")[0].split(".")[0] or "override"
    refuse(files, args, [key, "override"], "bad override")


# --------------------------------------------------------------------------- the count


def test_zz_at_least_500_configs_were_fuzzed():
    total = sum(FUZZED.values())
    if len(FUZZED) < len(STRATEGIES):
        pytest.skip("run it with every fuzz test above (some were deselected)")
    print(f"\nconfigs fuzzed: {total} ({dict(FUZZED)})")
    assert total >= MIN_TOTAL, dict(FUZZED)
    assert STRATEGIES <= set(FUZZED)
