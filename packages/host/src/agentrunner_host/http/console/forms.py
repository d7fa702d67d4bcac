"""A runner's configuration form (its ``DynamicFormItemSchema`` list) turned into the fields the agents page
renders: one :class:`FormField` per item, with its widget, its label and help in the reader's language, its
current value (or the form's default) and, for the resource selectors, the host's models and knowledge bases
to choose from.

A field marked ``secret`` is never filled with a value: it takes the name of an environment variable (stored
as ``{"env": "VAR"}``, which names the variable, not its value), so the page cannot show a secret back.
``static/js/agents.js`` reads the fields back into a runner config by their ``data-kind``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal, cast

import orjson
from agentrunner import DynamicFormItemSchema, I18nObject
from pydantic import JsonValue

from agentrunner_host.config.secrets import is_env_ref

__all__ = [
    "LOCALES",
    "PROMPT_ROLES",
    "Choice",
    "FormField",
    "WidgetKind",
    "form_fields",
    "pick_locale",
    "text_in",
]

WidgetKind = Literal[
    "string",
    "text",
    "integer",
    "float",
    "boolean",
    "select",
    "json",
    "secret",
    "model",
    "model-fallback",
    "multi",
    "prompt",
]
"""How a field is entered (``data-kind`` in the page; agents.js reads each kind back)."""

LOCALES: Final = ("en_US", "zh_Hans")
"""Languages the console picks labels in (``?lang=`` or the browser's ``Accept-Language``)."""

_PLAIN: Final[dict[str, WidgetKind]] = {
    "string": "string",
    "text": "text",
    "integer": "integer",
    "float": "float",
    "boolean": "boolean",
    "select": "select",
    "json": "json",
}


@dataclass(frozen=True, slots=True)
class Choice:
    """One option of a select or a multi-select."""

    value: str
    """Stored value."""
    label: str
    """Shown text."""


@dataclass(frozen=True, slots=True)
class FormField:
    """One field of the form, ready for the template."""

    name: str
    """Key in the runner config."""
    type: str
    """The form item's own ``type`` (shown to the operator for unknown widgets)."""
    kind: WidgetKind
    """The widget."""
    label: str
    """Label in the reader's language."""
    help: str
    """Help text in the reader's language (may be empty)."""
    required: bool
    """The runner needs a value."""
    text: str
    """The current value as the input shows it (pretty JSON for ``json``; the variable name for ``secret``)."""
    checked: bool = False
    """``boolean``: on."""
    choices: tuple[Choice, ...] = ()
    """``select``, ``model``, ``model-fallback`` and ``multi``: what can be picked."""
    selected: frozenset[str] = frozenset()
    """The picked values (``model-fallback``: the fallbacks; ``multi``: every picked one)."""
    note: str = ""
    """A remark about the stored value (a secret stored as a literal, a value outside the options)."""
    messages: tuple[tuple[str, str], ...] = ()
    """``prompt``: the prompt's messages as ``(role, content)``."""


def pick_locale(query: str | None, accept_language: str | None) -> str:
    """``zh_Hans`` when asked for (``?lang=``) or preferred by the browser, else ``en_US``."""
    if query in LOCALES:
        return cast("str", query)
    first = (accept_language or "").split(",")[0].strip().lower()
    return "zh_Hans" if first.startswith("zh") else "en_US"


def text_in(value: I18nObject | None, locale: str) -> str:
    """*value* in *locale*, else in English, else in any language it has."""
    if value is None:
        return ""
    found = cast("object", getattr(value, locale, None))
    if isinstance(found, str) and found:
        return found
    if value.en_US:
        return value.en_US
    for other in value.model_dump().values():
        if isinstance(other, str) and other:
            return other
    return ""


def _json_text(value: object) -> str:
    if value is None:
        return ""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def _scalar_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return _json_text(value)


PROMPT_ROLES: Final = ("system", "user", "assistant")
"""Roles a prompt message can have."""


def _messages(value: object) -> tuple[tuple[str, str], ...] | None:
    """A prompt value as ``(role, content)`` pairs, or ``None`` when it is not a list of such messages."""
    if value is None:
        return ()
    if not isinstance(value, list):
        return None
    out: list[tuple[str, str]] = []
    for item in cast("list[object]", value):
        if not isinstance(item, dict):
            return None
        message = cast("dict[str, object]", item)
        role, content = message.get("role"), message.get("content")
        if role not in PROMPT_ROLES or not isinstance(content, str) or set(message) - {"role", "content"}:
            return None
        out.append((cast("str", role), content))
    return tuple(out)


def _strings(value: object) -> list[str]:
    if isinstance(value, list):
        return [v for v in cast("list[object]", value) if isinstance(v, str)]
    return []


def _field(
    item: DynamicFormItemSchema,
    value: JsonValue,
    *,
    locale: str,
    llms: Sequence[str],
    reranks: Sequence[str],
    knowledge_bases: Sequence[str],
) -> FormField:
    common = FormField(
        name=item.name,
        type=item.type,
        kind="json",
        label=text_in(item.label, locale) or item.name,
        help=text_in(item.description, locale),
        required=item.required,
        text="",
    )
    if item.secret:
        if is_env_ref(value):
            return replace(common, kind="secret", text=str(cast("dict[str, str]", value)["env"]))
        stored = value not in (None, "")
        note = (
            "A literal value is stored (it is never shown); name a variable to replace it." if stored else ""
        )
        return replace(common, kind="secret", text="", note=note)
    kind = _PLAIN.get(item.type)
    if kind == "boolean":
        return replace(common, kind="boolean", text="", checked=value is True)
    if kind == "select":
        choices = tuple(Choice(o.name, text_in(o.label, locale) or o.name) for o in item.options)
        current = _scalar_text(value)
        note = ""
        if current and current not in {c.value for c in choices}:
            # a value outside the runner's options (a self-hosted endpoint, say) stays selectable as it is
            choices = (*choices, Choice(current, current))
            note = "The stored value is not one of the form's options."
        return replace(common, kind="select", text=current, choices=choices, note=note)
    if kind in {"string", "text", "integer", "float"}:
        return replace(common, kind=cast("WidgetKind", kind), text=_scalar_text(value))
    if item.type in {"llm-model-selector", "rerank-model-selector"}:
        pool = llms if item.type == "llm-model-selector" else reranks
        current = value if isinstance(value, str) else ""
        choices = tuple(Choice(m, m) for m in pool)
        if current and current not in pool:
            choices = (*choices, Choice(current, f"{current} (not configured on this host)"))
        return replace(common, kind="model", text=current, choices=choices)
    if item.type == "model-fallback-selector":
        mapping = cast("dict[str, object]", value) if isinstance(value, dict) else {}
        primary = mapping.get("primary")
        fallbacks = _strings(mapping.get("fallbacks"))
        current = primary if isinstance(primary, str) else ""
        names = list(llms) + [m for m in [current, *fallbacks] if m and m not in llms]
        return replace(
            common,
            kind="model-fallback",
            text=current,
            choices=tuple(Choice(m, m) for m in names),
            selected=frozenset(fallbacks),
        )
    if item.type == "knowledge-base-multi-selector":
        picked = _strings(value)
        names = list(knowledge_bases) + [k for k in picked if k not in knowledge_bases]
        return replace(
            common,
            kind="multi",
            text="",
            choices=tuple(Choice(k, k) for k in names),
            selected=frozenset(picked),
        )
    if item.type == "prompt-editor":
        messages = _messages(value)
        if messages is not None:
            return replace(common, kind="prompt", messages=messages)
        # anything else (a plain string, extra keys) is kept exactly as it is, as JSON
    # json, tool-multi-selector and widgets this console does not know: the value as JSON
    return replace(common, kind="json", text=_json_text(value))


def form_fields(
    schema: Sequence[DynamicFormItemSchema],
    config: Mapping[str, JsonValue] | None,
    *,
    locale: str,
    llms: Sequence[str] = (),
    reranks: Sequence[str] = (),
    knowledge_bases: Sequence[str] = (),
) -> list[FormField]:
    """The fields of *schema*, filled from *config* (a new agent: ``None``, so every field shows its default).

    *llms*, *reranks* and *knowledge_bases* are the ids the host has configured, offered by the selectors.
    """
    return [
        _field(
            item,
            item.default if config is None else config.get(item.name, item.default),
            locale=locale,
            llms=llms,
            reranks=reranks,
            knowledge_bases=knowledge_bases,
        )
        for item in schema
    ]
