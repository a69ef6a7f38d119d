"""One rule for binding a name in a registry (task classes, engines): a name means one class.

A plugin cannot take a built-in name, nor one that another module's class holds: a config that names
``linear`` computes the same thing in every process, whatever was imported before, so its hash keeps its
meaning. The same class defined again (a notebook cell run twice, a reloaded module: same module and
qualified name) replaces the old one, and the values kept for the next configs are forgotten, since they
were made by the old definition."""

from __future__ import annotations

from typing import Any

from .recent import forget_kept

BUILTIN_PACKAGE = "lipschitz_icl"


def origin(cls: type) -> str:
    """Where a class is defined: ``module.QualifiedName``."""
    return f"{cls.__module__}.{cls.__qualname__}"


def is_builtin(cls: type) -> bool:
    """Whether the toolkit itself defines ``cls`` (its own package, papers included)."""
    return cls.__module__ == BUILTIN_PACKAGE or cls.__module__.startswith(BUILTIN_PACKAGE + ".")


def bind(table: dict[str, Any], name: str, cls: type, what: str) -> None:
    """``table[name] = cls``, unless ``name`` belongs to another class (ValueError naming both)."""
    old = table.get(name)
    if old is not None and old is not cls:
        if is_builtin(old) and not is_builtin(cls):
            raise ValueError(f"{what} {name!r} is built in ({origin(old)}); register {origin(cls)} under "
                             "another name")
        if origin(old) != origin(cls):
            raise ValueError(f"{what} {name!r} is already registered by {origin(old)}; register {origin(cls)} "
                             "under another name")
        forget_kept()  # the same class defined again: what was kept was made by the old definition
    table[name] = cls
