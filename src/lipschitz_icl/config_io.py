"""Reading configs: YAML files and ``key.sub=value`` overrides in, one-line errors out.

The schema lives in ``config.py``; this module knows nothing of it beyond the root model it is
handed, so loading, overrides and error formatting can be reused (run configs, sweep specs).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib
import io
import re
import sys
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


def clip(value: Any, limit: int = 200) -> str:
    """str of a user value (a path), cut to ``limit`` characters."""
    text = str(value)
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


class CoreSafeLoader(yaml.SafeLoader):
    """PyYAML's safe loader with the YAML 1.2 core schema's plain scalars (one resolver for files and
    overrides: ``1e-3`` is a float wherever it appears, ``yes``/``on``/``010``/``1:30`` are what they
    look like) and duplicate keys refused."""

    yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag.rsplit(":", 1)[1] not in ("bool", "int", "float",
                                                                                    "timestamp")]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # keys from a merged anchor may be overridden
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                continue  # an unhashable key: the safe loader refuses it itself
            if duplicate:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {short(key)}",
                                                        key_node.start_mark)
        return super().construct_mapping(node, deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        text = self.construct_scalar(node)
        try:
            return int(text, 0) if text.lower().startswith(("0o", "0x")) else int(text, 10)
        except ValueError:  # Python refuses to parse integers of more than 4300 digits
            raise yaml.constructor.ConstructorError(None, None, f"integer of {len(text)} characters is too "
                                                    "long (at most 4300 digits)", node.start_mark) from None


CoreSafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
CoreSafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), list("-+0123456789"))
CoreSafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."))
CoreSafeLoader.add_constructor("tag:yaml.org,2002:int", CoreSafeLoader.construct_yaml_int)


def load_yaml(text: str) -> Any:
    """Parse YAML text with CoreSafeLoader (no Python objects: only the safe tags)."""
    return yaml.load(text, Loader=CoreSafeLoader)


def _yaml_problem(e: yaml.YAMLError) -> str:
    """Where and why YAML text was refused: ' at line 3 (duplicate key ...)'."""
    mark = getattr(e, "problem_mark", None)
    where = f" at line {mark.line + 1}" if mark is not None else ""
    problem = getattr(e, "problem", None) or ""
    return where + (f" ({problem})" if problem else "")


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


_EventLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser where PyYAML has it: fast
_OPENS, _CLOSES = (yaml.SequenceStartEvent, yaml.MappingStartEvent), (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def check_yaml_size(text: str, what: str) -> None:
    """Refuse YAML text of more than MAX_CONFIG_VALUES values (keys and aliases count) or MAX_CONFIG_DEPTH
    levels while it is parsed, before anything is built: a 15 MB list is refused in about a second instead of
    a minute and 1.6 GB. Malformed text is left to the loader, which names the problem."""
    values = depth = 0
    try:
        for event in yaml.parse(text, Loader=_EventLoader):
            if isinstance(event, yaml.ScalarEvent | yaml.AliasEvent):
                values += 1
                if values > MAX_CONFIG_VALUES:
                    raise ConfigError(what, f"holds more than {MAX_CONFIG_VALUES} values")
            elif isinstance(event, _OPENS):
                depth += 1
                if depth > MAX_CONFIG_DEPTH:
                    raise ConfigError(what, f"is nested more than {MAX_CONFIG_DEPTH} levels deep")
            elif isinstance(event, _CLOSES):
                depth -= 1
    except yaml.YAMLError:
        return


def path_kind(path: str | Path) -> str:
    """'file', 'dir', 'other' or 'missing'; a name the system refuses (too long, a NUL byte) is 'missing'."""
    try:
        p = Path(path)
        return "file" if p.is_file() else "dir" if p.is_dir() else "other" if p.exists() else "missing"
    except (OSError, ValueError):
        return "missing"


def read_yaml(path: str | Path) -> Any:
    """Read a YAML file with the safe loader; every failure is a UserInputError naming the file."""
    p = Path(path)
    kind = path_kind(p)
    if kind != "file":
        raise UserInputError(f"{clip(path)}: no such file" if kind == "missing" else f"{clip(path)}: not a file")
    try:
        if p.stat().st_size > MAX_YAML_BYTES:
            raise UserInputError(f"{clip(path)}: larger than {MAX_YAML_BYTES // 2**20} MiB, too large for a config")
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise UserInputError(f"{clip(path)}: not UTF-8 text") from None
    except OSError as e:
        raise UserInputError(f"{clip(path)}: cannot be read ({e.strerror})") from None
    check_yaml_size(text, clip(path))
    try:
        data = load_yaml(text)
    except yaml.YAMLError as e:
        raise UserInputError(f"{clip(path)}: malformed YAML{_yaml_problem(e)}") from None
    except RecursionError:
        raise UserInputError(f"{clip(path)}: YAML nested too deeply") from None
    check_shape(data, clip(path))
    return data


# --------------------------------------------------------------------------- overrides


@functools.cache
def number_fields(model: type) -> dict[str, tuple[bool, bool]]:
    """Per field of a pydantic model class, read once: (a number: true/false and bytes refused, a whole number: 1e4
    read as 10000). pydantic's ``model_fields`` costs ~1 us a read, and a config validates ~60 fields."""
    return {name: (f.annotation in (int, float), f.annotation in (int, int | None))
            for name, f in model.model_fields.items()}


def as_whole_number(value: Any) -> Any:
    """An integral float (``1e4``, as YAML reads it) or digits grouped by ``_`` (``1_000``) as the whole number it
    writes; anything else as it is (the config's validation then says what is wrong with it)."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"[+-]?\d+(_\d+)+", value):
        return int(value)
    return value


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse ``key.sub=value``; the value is read as YAML (so 1e-3, true, [0.5, 0.5] work). Remembered (a
    sweep applies each axis value at many points); the caller gets its own copy."""
    parts, value = _parse_override(text)
    return list(parts), copy.deepcopy(value)


@functools.lru_cache(maxsize=4096)
def _parse_override(text: str) -> tuple[tuple[str, ...], Any]:
    if "=" not in text:
        raise UserInputError(f"override {short(text)}: expected key.sub=value")
    key, _, raw = text.partition("=")
    parts = key.strip().split(".")
    if not all(parts):
        raise UserInputError(f"override {short(text)}: empty key name (expected key.sub=value)")
    check_yaml_size(raw, f"override {short(text)}")
    try:
        value = load_yaml(raw) if raw.strip() else None
    except yaml.YAMLError as e:
        raise UserInputError(f"override {short(text)}: value is not valid YAML{_yaml_problem(e)}") from None
    except RecursionError:
        raise UserInputError(f"override {short(text)}: value nested too deeply") from None
    check_shape(value, f"override {short(text)}")
    return tuple(parts), value


def copied_along(data: dict, overrides: list[str]) -> dict:
    """``data`` with the mappings on each override's key path copied (one level each) and everything else
    shared: all that ``apply_overrides`` changes, so applying ``overrides`` to the result leaves ``data`` as it
    was (a sweep builds each point from its base without a deep copy)."""
    top = dict(data)
    for text in overrides:
        node = top
        for part in _parse_override(text)[0][:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                break  # apply_overrides puts a new mapping here, or refuses
            node[part] = node = dict(child)
    return top


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
                raise UserInputError(f"override {short(text)}: {short(part)} is not a section")
            node = child
        node[parts[-1]] = value
        if parts[-1] in ("path", "kind"):  # another file: the digest recorded for the old one no longer applies
            node.pop("file_sha256", None)
    return data


class PluginImportError(Exception):
    """A user's module could not be imported; the message says why, in one line (after the module's name)."""


def import_isolated(module: str) -> None:
    """Import a user's module (plugins are code: only name modules you trust) so that it cannot take the command
    over: it sees no command-line arguments (``sys.argv`` is the program alone), what it prints goes to stderr
    (never into a command's output), and an exit (``sys.exit``) or any error while importing is raised as
    PluginImportError saying why, with the last line it printed."""
    argv, printed = sys.argv, io.StringIO()
    sys.argv = argv[:1]
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            importlib.import_module(module)
    except ImportError as e:
        raise PluginImportError(f"cannot be imported ({e}){_last_line(printed)}") from None
    except SystemExit as e:
        raise PluginImportError(f"called sys.exit({e.code!r}) while importing{_last_line(printed)}") from None
    except Exception as e:  # noqa: BLE001 - a plugin that fails on import is reported, not a crash
        raise PluginImportError(f"failed while importing ({type(e).__name__}: {e}){_last_line(printed)}") from None
    finally:
        sys.argv = argv
    sys.stderr.write(printed.getvalue())  # what it printed while importing fine: shown, on stderr


def _last_line(printed: io.StringIO) -> str:
    lines = [line.strip() for line in printed.getvalue().splitlines() if line.strip()]
    return f"; it printed: {lines[-1][:200]!r}" if lines else ""


def import_plugin(module: str) -> None:
    """Import a user module that registers task classes or engines (named explicitly in ``plugins``): see
    ``import_isolated``. One that fails is a ConfigError naming it."""
    try:
        import_isolated(module)
    except PluginImportError as e:
        raise ConfigError("plugins", f"module {module!r} {e}") from None
