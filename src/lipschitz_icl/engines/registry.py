"""The engine registry: ``engine.kind`` names a registered Engine class.

    @register_engine
    class MyEngine(Engine):
        name = "mine"
        ...

Built-in engines register when ``lipschitz_icl.engines`` is imported; a plugin module (config
key ``plugins``) registers its own when it is imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..registry_names import bind
from .base import Engine

if TYPE_CHECKING:
    from ..config import Config
    from ..problem import Problem

_ENGINES: dict[str, type[Engine]] = {}


def register_engine(cls: type[Engine]) -> type[Engine]:
    """Class decorator: make ``cls`` available as ``engine.kind: <cls.name>``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} needs a class attribute `name` (its engine.kind)")
    bind(_ENGINES, cls.name, cls, "engine")  # a built-in name, or another module's, is refused
    return cls


def engine_names() -> list[str]:
    return sorted(_ENGINES)


def engine_class(kind: str) -> type[Engine]:
    """The class registered as ``engine.kind: kind``."""
    cls = _ENGINES.get(kind)
    if cls is None:
        raise ConfigError("engine.kind", f"{kind!r} is not registered (known: {', '.join(engine_names())})")
    return cls


def build_engine(problem: Problem) -> Engine:
    """The engine a run's config asks for, built from its Problem."""
    return engine_class(problem.config.engine.kind).from_problem(problem)


def batchable(cfg: Config) -> bool:
    """Whether the run of ``cfg`` goes through the batched trainer (asked of its engine)."""
    return engine_class(cfg.engine.kind).batchable(cfg)


def stackable(cfg: Config) -> bool:
    """Whether runs of ``cfg`` take their steps together where several share a shape (asked of its engine)."""
    return engine_class(cfg.engine.kind).stackable(cfg)
