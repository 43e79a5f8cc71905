"""Settings from a YAML file (--config): keys are the flags' names with
underscores; flags on the command line win over the file."""

import dataclasses
import difflib

import yaml


class ConfigFileError(Exception):
    """A file that cannot give settings: the message is one line."""


def read_settings(path, fields):
    """The file's settings, checked against `fields` (the Config dataclass's)."""
    try:
        with open(path, encoding="utf-8") as stream:
            settings = yaml.safe_load(stream)
    except OSError as error:
        reason = error.strerror
        raise ConfigFileError(f"cannot read --config {path}: {reason}") from None
    except UnicodeDecodeError as error:
        raise ConfigFileError(
            f"--config {path}: not UTF-8 text (byte {error.start})"
        ) from None
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        line = f" (line {where.line + 1})" if where else ""
        raise ConfigFileError(f"--config {path}: not valid YAML{line}") from None
    if settings is None:
        return {}
    if not isinstance(settings, dict):
        raise ConfigFileError(f"--config {path}: expected setting: value lines")
    by_name = {spec.name: spec for spec in fields}
    for key, value in settings.items():
        if key not in by_name:
            raise ConfigFileError(f"--config {path}: {unknown_key(key, by_name)}")
        problem = type_problem(by_name[key], value)
        if problem:
            raise ConfigFileError(f"--config {path}: {key}: {problem}")
    return settings


def unknown_key(key, names):
    close = difflib.get_close_matches(str(key).replace("-", "_"), names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown setting {key!r}{hint}"


def type_problem(spec, value):
    """Why `value` cannot be this field's value, or None."""
    expected = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}
    accepted = expected[spec.type]
    # bool is an int to Python, never to a config file
    wrong_type = not isinstance(value, accepted) or (
        isinstance(value, bool) and spec.type is not bool
    )
    if wrong_type:
        return f"expected {spec.type.__name__}, got {value!r}"
    choices = spec.metadata["choices"]
    if choices and value not in choices:
        return f"expected one of {', '.join(choices)}, got {value!r}"
    return None


def to_yaml(config):
    """The resolved settings in the form --config reads."""
    return yaml.safe_dump(dataclasses.asdict(config), sort_keys=False)
