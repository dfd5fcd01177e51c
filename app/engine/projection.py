"""Closed-schema projection of a larger caller payload (spec section 6).

Mechanical and generic: no renaming, no aliases, no knowledge of field names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.contract.schemas import CompiledSchema


def project_payload(schema: CompiledSchema, payload: Mapping[str, Any]) -> dict[str, Any]:
    """Keep the declared top-level properties of a closed object schema.

    An open or empty schema receives the whole payload (a shallow copy).
    """
    if not schema.is_closed_object:
        return dict(payload)
    declared = schema.declared_properties
    return {key: value for key, value in payload.items() if key in declared}
