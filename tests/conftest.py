import site
import sys
from pathlib import Path

import pytest
import torch

import lipschitz_icl.papers  # noqa: F401  (the built-in papers register their claims and experiments)
from lipschitz_icl.experiments import claims, registry

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))  # so tests can import their plugin modules

torch.set_num_threads(1)


@pytest.fixture
def quickstart_path() -> Path:
    return ROOT / "configs" / "quickstart.yaml"


@pytest.fixture
def small_overrides() -> list[str]:
    """A short run: few steps, so tests stay fast."""
    return ["train.steps=60", "train.log_every=5", "engine.draws=64", "eval.functions=64"]

# every property test is deterministic: the same examples on every run, no example database
from hypothesis import settings  # noqa: E402

settings.register_profile("deterministic", derandomize=True, database=None, deadline=None)
settings.load_profile("deterministic")


# the devices a test can run on: the CPU always, CUDA where a GPU is present (skipped with a reason elsewhere)
CUDA_SKIP = pytest.mark.skip(reason="no CUDA device on this machine")
DEVICES = ["cpu", "cuda" if torch.cuda.is_available() else pytest.param("cuda", marks=CUDA_SKIP)]


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    """Parametrises a test over the available devices: "cpu", and "cuda" when a GPU is present."""
    return request.param


@pytest.fixture
def isolated_registry():
    """Papers, claims and experiments registered inside the test (a plugin) are gone after it: the registry
    tables are restored in place and the plugin modules it imported forgotten, so a later import registers
    again."""
    tables = [registry._EXPERIMENTS, registry._PAPERS, claims.STATEMENTS, claims.PAPER_OF, claims._POSITION]
    saved = [dict(t) for t in tables]
    order, modules = list(claims.PAPER_ORDER), set(sys.modules)
    yield
    for table, copy in zip(tables, saved, strict=True):
        table.clear()
        table.update(copy)
    claims.PAPER_ORDER[:] = order
    for name in set(sys.modules) - modules:
        if not name.startswith("lipschitz_icl") and _is_plugin(sys.modules.get(name)):
            sys.modules.pop(name, None)


_INSTALLED = tuple(str(Path(p).resolve()) for p in {sys.prefix, sys.base_prefix, *site.getsitepackages()})


def _is_plugin(module) -> bool:
    """A module a test's plugin brought in (a file outside the Python installation), not a library's own
    submodule loaded lazily on the way (torch's: importing those twice fails)."""
    file = getattr(module, "__file__", None)
    return bool(file) and not str(Path(file).resolve()).startswith(_INSTALLED)
