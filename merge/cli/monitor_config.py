"""``pith-merge monitor --config FILE``: every option of the command in a TOML file.

The file's keys are the options' long names without their dashes (``state-dir``, ``subject``,
``trust``, ``interval``, ``listen``, ``webhook``, ...) and ``sources`` for the SOURCEs; a
repeatable option takes a list. Read with the standard library's ``tomllib``. What the command
is given wins: the command line, then the environment variables (``PITH_MONITOR_*``), then the
file, then the built-in defaults (click's own order: the file is the context's ``default_map``).
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from typing import Any, Final

import click

__all__ = ["ENV_PREFIX", "config_keys", "load_config"]

#: The environment variables of the command: ``PITH_MONITOR_`` and the option's name.
ENV_PREFIX: Final = "PITH_MONITOR_"


def config_keys(command: click.Command) -> dict[str, click.Parameter]:
    """The key of each parameter in a config file: its long option name (``state-dir``), or its
    name for an argument (``sources``). ``--config`` itself and ``--help`` have none."""
    keys: dict[str, click.Parameter] = {}
    for param in command.params:
        if param.name in (None, "config") or (getattr(param, "is_eager", False) and param.name == "help"):
            continue
        if isinstance(param, click.Option):
            longs = [opt for opt in param.opts if opt.startswith("--")]
            keys[longs[0].removeprefix("--")] = param
        else:
            keys[param.name] = param
    return keys


def load_config(command: click.Command, path: str) -> dict[str, Any]:
    """The file at ``path`` as the command's ``default_map`` (parameter name -> value).

    Raises :class:`click.BadParameter` for a file that is not TOML, an unknown key, or a list
    where one value is wanted (and the other way round): a config mistake is a usage error.
    """
    try:
        with open(path, "rb") as file:
            table: Mapping[str, Any] = tomllib.load(file)
    except OSError as exc:
        raise click.BadParameter(f"{path}: {exc.strerror or exc}", param_hint="--config") from None
    except (ValueError, RecursionError) as exc:
        # TOMLDecodeError is a ValueError, and so is what else tomllib lets out of a text it cannot
        # read: bad UTF-8 (UnicodeDecodeError: TOML is UTF-8), an integer of more than 4,300
        # digits (Python's int limit); and arrays 1,000 deep exhaust its recursion.
        raise click.BadParameter(f"{path}: not TOML: {exc}", param_hint="--config") from None
    keys = config_keys(command)
    values: dict[str, Any] = {}
    for key, value in table.items():
        param = keys.get(key)
        if param is None or param.name is None:
            known = ", ".join(sorted(keys))
            raise click.BadParameter(f"{path}: no option {key!r} (the keys: {known})", param_hint="--config")
        many = param.multiple or param.nargs == -1
        if many != isinstance(value, list):
            wanted = "a list" if many else "one value, not a list"
            raise click.BadParameter(f"{path}: {key} is {wanted}", param_hint="--config")
        for one in value if many else [value]:
            if not _of_type(one, param.type):
                wanted = _WANTED.get(_kind(param.type), "a string")
                raise click.BadParameter(f"{path}: {key} is {wanted}, not {one!r}", param_hint="--config")
        values[param.name] = value
    return values


#: What a value of each kind of option is, in words.
_WANTED: Final = {"bool": "true or false", "int": "a whole number", "float": "a finite number"}


def _kind(kind: click.ParamType[Any]) -> str:
    if isinstance(kind, click.types.BoolParamType):
        return "bool"
    if isinstance(kind, click.types.IntParamType):  # IntRange too
        return "int"
    if isinstance(kind, click.types.FloatParamType):  # FloatRange too
        return "float"
    return "str"


def _of_type(value: Any, kind: click.ParamType[Any]) -> bool:
    """Whether a TOML value is one the option takes: click converts what it is given, and a
    value of another type reached its conversion, or the command, as it is (a table where a
    number is wanted: a ``TypeError``; an integer as ``state-dir``: ``os.stat`` of a file
    descriptor; a boolean read as the number 1). Numbers must be finite (``nan`` passes every
    range check)."""
    wanted = _kind(kind)
    if wanted == "bool":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if wanted == "int":
        return isinstance(value, int)
    if wanted == "float":
        try:
            return isinstance(value, int | float) and math.isfinite(value)
        except OverflowError:  # an integer past a float's range (10**400)
            return False
    return isinstance(value, str)
