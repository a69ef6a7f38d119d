"""``run --print-config``: the resolved config as YAML, each key followed by a comment with what it means
(the schema's Field descriptions in config.py) and the values it allows (its choices, its bounds, the
registered task classes and engines). The comments leave it valid YAML: it loads back as the same config."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal

import annotated_types
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from ..config import Config
from ..engines import engine_names
from ..tasks import task_names

COMMENT_COLUMN = 34  # comments start here (or two spaces after a longer key: value)
_BOUNDS = ((annotated_types.Ge, "ge", ">="), (annotated_types.Gt, "gt", ">"), (annotated_types.Le, "le", "<="),
           (annotated_types.Lt, "lt", "<"))


def _choices(annotation: Any) -> list[str]:
    """The values an annotation allows, as words: Literal members, 'true | false', 'a list', 'none'."""
    if typing.get_origin(annotation) is Literal:
        return [str(v) for v in typing.get_args(annotation)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [c for arg in typing.get_args(annotation) for c in _choices(arg)]
    if annotation is bool:
        return ["true", "false"]
    if annotation is type(None):
        return ["none"]
    if typing.get_origin(annotation) is list:
        return ["a list"]
    if annotation is str:
        return ["a string"]
    if annotation is dict or typing.get_origin(annotation) is dict:
        return ["a mapping"]
    return []


def _number(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def allowed(field: FieldInfo, path: str) -> str:
    """What ``path`` (``task.kind``) allows: its choices, its numeric bounds, or the registered names."""
    if path in ("task.kind", "eval.other_class"):
        names = task_names() + (["none"] if path == "eval.other_class" else [])
        return " | ".join(names) + " (registered task classes)"
    if path == "engine.kind":
        return " | ".join(engine_names()) + " (registered engines)"
    choices = _choices(field.annotation)
    bounds = [f"{word} {_number(getattr(m, attr))}" for m in field.metadata for kind, attr, word in _BOUNDS
              if isinstance(m, kind)]
    if bounds:
        base = "an integer" if field.annotation is int or "int" in str(field.annotation) else "a number"
        choices = [f"{base} {', '.join(bounds)}", *[c for c in choices if c == "none"]]
    return " | ".join(choices)


def _scalar(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def _line(key: str, value: Any, field: FieldInfo, path: str, indent: str) -> str:
    head = f"{indent}{key}: {_scalar(value)}"
    words = [field.description or ""]
    can = allowed(field, path)
    if can:
        words.append(f"allowed: {can}")
    return f"{head.ljust(COMMENT_COLUMN)}  # {'; '.join(w for w in words if w)}"


def annotated_yaml(cfg: Config) -> str:
    """The config as YAML, every key with its description and allowed values in a comment."""
    data = cfg.model_dump(mode="json")
    lines = []
    for name, field in Config.model_fields.items():
        if name not in data:
            continue
        sub = field.annotation if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel) \
            else None
        if sub is None:
            lines.append(_line(name, data[name], field, name, ""))
            continue
        lines.append(f"{(name + ':').ljust(COMMENT_COLUMN)}  # {field.description}")
        for key, inner in sub.model_fields.items():
            if key in data[name]:
                lines.append(_line(key, data[name][key], inner, f"{name}.{key}", "  "))
    return "\n".join(lines) + "\n"
