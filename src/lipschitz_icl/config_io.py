"""Reading configs: YAML files and ``key.sub=value`` overrides in, one-line errors out.

The schema lives in ``config.py``; this module knows nothing of it beyond the root model it is
handed, so loading, overrides and error formatting can be reused (run configs, sweep specs).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from .errors import ConfigError, UserInputError

MAX_CONFIG_VALUES = 100_000  # a config (after YAML aliases are expanded) holds at most this many values
MAX_CONFIG_DEPTH = 32  # ... nested at most this deep
MAX_YAML_BYTES = 16 * 2**20  # a config or spec file larger than this is refused unread


def short(value: Any, limit: int = 60) -> str:
    """repr of a user value, cut to ``limit`` characters (error messages stay one short line)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------- error formatting


_UNION_TAG = re.compile(r"(literal|list|dict|set|tuple|function-\w+)\[.*\]|int|float|str|bool|none")


def loc(parts: tuple, keys: bool = False) -> str:
    """A dotted field path; a key that is not a plain name is shown as its repr. Unless the error is
    about a key (``keys``), the tags pydantic adds for the members of a union are left out."""
    out = []
    for part in parts:
        if not keys and isinstance(part, str) and _UNION_TAG.fullmatch(part):
            continue
        text = str(part)
        out.append(text if re.fullmatch(r"[A-Za-z0-9_]{1,60}", text) else short(part, 40))
    return ".".join(out) or "config"


def allowed_keys(root: type[BaseModel], parts: tuple) -> list[str]:
    """The keys of the section of ``root`` at ``parts`` (empty when it is not a section)."""
    model = root
    for part in parts:
        field = model.model_fields.get(str(part))
        ann = getattr(field, "annotation", None) if field else None
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return []
        model = ann
    return list(model.model_fields)


def format_validation_error(err: ValidationError, root: type[BaseModel]) -> ConfigError:
    """The first error pydantic found, as one line naming the field and what is allowed."""
    first = err.errors()[0]
    inner = (first.get("ctx") or {}).get("error")
    if isinstance(inner, ConfigError):
        return inner
    where = loc(first["loc"], keys=first["type"] in ("extra_forbidden", "string_type"))
    msg = first["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
        allowed = allowed_keys(root, first["loc"][:-1])
        if allowed:
            msg += f" (allowed: {', '.join(allowed)})"
    elif first["type"] == "missing":
        msg = "required key is missing"
    elif first["type"] in ("model_type", "model_attributes_type", "dict_type"):
        allowed = allowed_keys(root, first["loc"])
        got = type(first.get("input")).__name__
        msg = f"must be a section of keys (got {got})" + (f"; allowed keys: {', '.join(allowed)}" if allowed else "")
    elif "input" in first and first["type"] not in ("value_error",) and not isinstance(first["input"], dict | list):
        msg += f" (got {short(first['input'])})"
    return ConfigError(where, msg)


# --------------------------------------------------------------------------- YAML


def check_shape(data: Any, what: str = "config") -> None:
    """Refuse data nested deeper than MAX_CONFIG_DEPTH or holding more than MAX_CONFIG_VALUES values
    (YAML aliases can make a small file expand exponentially: this stops at the budget)."""
    budget = MAX_CONFIG_VALUES
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        budget -= 1
        if budget < 0:
            raise ConfigError(what, f"holds more than {MAX_CONFIG_VALUES} values (YAML aliases expanded)")
        if depth > MAX_CONFIG_DEPTH:
            raise ConfigError(what, f"is nested more than {MAX_CONFIG_DEPTH} levels deep")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
            stack.extend((k, depth + 1) for k in node)
        elif isinstance(node, list | tuple | set):
            stack.extend((v, depth + 1) for v in node)


def read_yaml(path: str | Path) -> Any:
    """Read a YAML file with the safe loader; every failure is a UserInputError naming the file."""
    p = Path(path)
    if not p.is_file():
        raise UserInputError(f"{path}: no such file" if not p.exists() else f"{path}: not a file")
    try:
        if p.stat().st_size > MAX_YAML_BYTES:
            raise UserInputError(f"{path}: larger than {MAX_YAML_BYTES // 2**20} MiB, too large for a config")
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise UserInputError(f"{path}: not UTF-8 text") from None
    except OSError as e:
        raise UserInputError(f"{path}: cannot be read ({e.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or ""
        raise UserInputError(f"{path}: malformed YAML{where}" + (f" ({problem})" if problem else "")) from None
    except RecursionError:
        raise UserInputError(f"{path}: YAML nested too deeply") from None
    check_shape(data, str(path))
    return data


# --------------------------------------------------------------------------- overrides


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse ``key.sub=value``; the value is read as YAML (so 1e-3, true, [0.5, 0.5] work)."""
    if "=" not in text:
        raise UserInputError(f"override {text!r}: expected key.sub=value")
    key, _, raw = text.partition("=")
    parts = key.strip().split(".")
    if not all(parts):
        raise UserInputError(f"override {text!r}: empty key name (expected key.sub=value)")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        raise UserInputError(f"override {text!r}: value is not valid YAML") from None
    return parts, value


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Set each ``key.sub=value`` in the nested mapping ``data`` (in place; returned)."""
    for text in overrides:
        parts, value = parse_override(text)
        node = data
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise UserInputError(f"override {text!r}: {part} is not a section")
            node = child
        node[parts[-1]] = value
    return data
