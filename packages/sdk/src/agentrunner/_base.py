"""Base classes of every protocol model.

Forward compatibility (PROTOCOL_V1 §3) is decided here, once:

* a newer host may add optional fields to what it sends, so every model **ignores unknown fields** instead of
  rejecting them (an older runner survives a newer host);
* a newer runner may add optional fields to its results, which an older host ignores the same way, while the
  fields the spec requires for a result ``type`` stay required and typed.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict

__all__ = ["ProtocolModel"]


class ProtocolModel(BaseModel):
    """Base of every wire model: unknown fields are ignored, field docstrings become descriptions."""

    model_config: ClassVar[ConfigDict] = ConfigDict(
        extra="ignore",
        use_attribute_docstrings=True,
        populate_by_name=True,
        ser_json_inf_nan="constants",
        # JSON has no NaN/Infinity: building a model with one fails here, in the runner, instead of reaching
        # the wire as null (which state reads as "delete").
        allow_inf_nan=False,
    )
