"""Config form items with both labels (en_US, zh_Hans) in one call."""

from __future__ import annotations

from collections.abc import Sequence

from agentrunner import DynamicFormItemSchema, FormOption, I18nObject
from pydantic import JsonValue

__all__ = ["form_field"]


def form_field(
    name: str,
    type_: str,
    label: tuple[str, str],
    help_text: tuple[str, str],
    *,
    default: JsonValue = None,
    required: bool = False,
    secret: bool = False,
    options: Sequence[str] = (),
    aliases: Sequence[str] = (),
) -> DynamicFormItemSchema:
    """A form item; *label* and *help_text* are ``(en_US, zh_Hans)``; *options* are a ``select``'s choices
    (suggestions on other types); *aliases* are other keys the runner reads the value from."""
    return DynamicFormItemSchema(
        name=name,
        type=type_,
        label=I18nObject(en_US=label[0], zh_Hans=label[1]),
        description=I18nObject(en_US=help_text[0], zh_Hans=help_text[1]),
        default=default,
        required=required,
        secret=secret,
        options=[FormOption(name=o, label=I18nObject(en_US=o, zh_Hans=o)) for o in options],
        aliases=list(aliases),
    )
