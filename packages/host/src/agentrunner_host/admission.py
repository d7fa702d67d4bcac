"""Admission of configured objects: the one id pattern, and an agent's runner config checked against its
runner's form before the agent is stored (HTTP ``POST``/``PUT /v1/agents``, ``agentrunner agents add``).

Without this an agent naming a runner that is not installed, or a config of the wrong type, is accepted and
only fails at run time (as ``runner_unavailable``), and an id such as ``../../etc/passwd`` or one with a NUL
is stored although no route can address it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final, cast

from agentrunner import AgentRunnerManifest, DynamicFormItemSchema
from pydantic import Field

from agentrunner_host.errors import ConfigurationError

__all__ = [
    "ID_PATTERN",
    "AdmissionError",
    "ConfigProblem",
    "Identifier",
    "check_agent_config",
    "config_problems",
    "is_valid_id",
]

ID_PATTERN: Final = r"^[A-Za-z0-9_\-][A-Za-z0-9_.:@+=\-]{0,199}$"
"""Ids of agents, bindings, scopes, conversations, threads, bots, workspaces, events and runs: 1 to 200
characters of letters, digits and ``_ - . : @ + =``, not starting with a dot. No ``/``, whitespace or control
characters, so every id is addressable as one URL path segment and is never a file-system path."""

_ID: Final = re.compile(ID_PATTERN)

Identifier = Annotated[str, Field(min_length=1, max_length=200, pattern=ID_PATTERN)]
"""A string constrained to :data:`ID_PATTERN` (use it for every id field)."""


def is_valid_id(value: str) -> bool:
    """Whether *value* matches :data:`ID_PATTERN`."""
    return _ID.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One reason a runner config does not fit its runner's form."""

    field: str
    """Key path, ``runner_config.<name>``."""
    reason: str
    """What is wrong."""

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}"


class AdmissionError(ConfigurationError):
    """An agent cannot be admitted; ``code`` is ``unknown_runner`` or ``invalid_runner_config``."""

    def __init__(self, code: str, problems: Sequence[ConfigProblem]) -> None:
        super().__init__("; ".join(str(p) for p in problems))
        self.code = code
        self.problems = tuple(problems)

    @property
    def fields(self) -> tuple[str, ...]:
        """The key paths named."""
        return tuple(p.field for p in self.problems)


def _is_env_ref(value: object) -> bool:
    if not isinstance(value, dict):
        return False
    ref = cast(dict[str, object], value)
    return set(ref) == {"env"} and isinstance(ref["env"], str)


def _is_str_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in cast(list[object], value))


def _is_message_list(value: object) -> bool:
    if not isinstance(value, list):
        return False
    for item in cast(list[object], value):
        if not isinstance(item, dict):
            return False
        message = cast(dict[str, object], item)
        if not isinstance(message.get("role"), str) or not isinstance(message.get("content"), str):
            return False
    return True


def _type_problem(item: DynamicFormItemSchema, value: Any) -> str | None:
    kind = item.type
    if kind == "prompt-editor":
        # A prompt is a list of {"role", "content"} messages (the local-agent runner's own default), or text.
        return None if isinstance(value, str) or _is_message_list(value) else "expected a list of messages"
    if kind in {"string", "text", "secret-input", "password", "textarea"}:
        return None if isinstance(value, str) else "expected a string"
    if kind == "integer":
        ok = isinstance(value, int | float) and not isinstance(value, bool) and float(value).is_integer()
        return None if ok else "expected an integer"
    if kind in {"float", "number"}:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return None if ok else "expected a number"
    if kind == "boolean":
        return None if isinstance(value, bool) else "expected true or false"
    if kind == "select":
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            return "expected one of the form's options"
        choices = [option.name for option in item.options]
        if choices and str(value) not in choices:
            return f"expected one of {', '.join(choices)}"
        return None
    if kind.endswith("-selector"):
        # Selector values are ids, a list of ids, or (fallback chains) an object of them.
        ok = isinstance(value, str | dict) or _is_str_list(value)
        return None if ok else "expected an id or a list of ids"
    return (
        None  # an open set of widget types (``json`` included): ones the host does not know are not checked
    )


def config_problems(
    schema: Sequence[DynamicFormItemSchema], config: Mapping[str, Any], *, runner_id: str = "the runner"
) -> list[ConfigProblem]:
    """Why *config* does not fit the form *schema*, field by field in the form's order, then unknown keys:

    * a ``required`` field without a value (under its name or one of its ``aliases``) or a default;
    * a value of the wrong type (``integer`` must be integral, ``float`` any number, ``boolean`` a boolean...);
    * a ``select`` value that is none of its options (options of other types are suggestions);
    * a key the form does not declare, by name or alias (only when the runner declares a form: a runner
      without one takes its config as given).

    ``{"env": "VAR"}`` references are accepted for any field (their values are read at run time). Forms have
    no ranges (``DynamicFormItemSchema`` carries none), so numbers are checked for type only."""
    items = {item.name: item for item in schema}
    known = set(items) | {alias for item in schema for alias in item.aliases}
    problems: list[ConfigProblem] = []
    for name, item in items.items():
        given = False
        for key in (name, *item.aliases):
            value = config.get(key)
            if value is None or value == "":
                continue
            given = True
            if _is_env_ref(value):
                continue
            reason = _type_problem(item, value)
            if reason is not None:
                problems.append(ConfigProblem(f"runner_config.{key}", reason))
        if not given and item.required and item.default in (None, ""):
            problems.append(ConfigProblem(f"runner_config.{name}", f"{runner_id} requires it"))
    if items:
        for key in config:
            if key not in known:
                problems.append(ConfigProblem(f"runner_config.{key}", f"not a field of {runner_id}'s form"))
    return problems


def check_agent_config(
    runner_id: str, runner_config: Mapping[str, Any], manifest: AgentRunnerManifest | None
) -> None:
    """Raise :class:`AdmissionError` unless the runner is available (*manifest* given) and the config fits."""
    if manifest is None:
        problem = ConfigProblem("runner_id", f"runner {runner_id} is not installed")
        raise AdmissionError("unknown_runner", [problem])
    problems = config_problems(manifest.config_schema, runner_config, runner_id=f"runner {runner_id}")
    if problems:
        raise AdmissionError("invalid_runner_config", problems)
