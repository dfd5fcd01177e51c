"""The data converter of serve's and the workers' Temporal clients: the SDK's JSON, with
dataclasses decoded from type hints read once per class.

The SDK's converter reads a dataclass's type hints (evaluating its annotations) for
every value it decodes: a plan's workflow input of a thousand lanes is two thousand
such reads, longer than the SDK lets one workflow activation take. The payloads are
the SDK's own JSON either way; only the decoding differs.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any, get_type_hints

from temporalio.converter import (
    BinaryNullPayloadConverter,
    BinaryPlainPayloadConverter,
    BinaryProtoPayloadConverter,
    CompositePayloadConverter,
    DataConverter,
    JSONPlainPayloadConverter,
    JSONProtoPayloadConverter,
    JSONTypeConverter,
    value_to_type,
)


class DataclassHintsOnce(JSONTypeConverter):
    """Dataclasses from JSON objects, each class's field hints read once."""

    def to_typed_value(self, hint: type, value: Any) -> Any:
        if not (dataclasses.is_dataclass(hint) and isinstance(hint, type)):
            return JSONTypeConverter.Unhandled
        if not isinstance(value, dict):
            raise TypeError(f"Cannot convert to dataclass {hint}, value is {type(value)} not dict")
        hints = _init_field_hints(hint)
        converters = [self]
        fields = {
            name: value_to_type(hints[name], given, converters)
            for name, given in value.items()
            if name in hints
        }
        return hint(**fields)


@cache
def _init_field_hints(cls: type) -> dict[str, Any]:
    hints = get_type_hints(cls)
    return {field.name: hints[field.name] for field in dataclasses.fields(cls) if field.init}


class PayloadConverter(CompositePayloadConverter):
    """The SDK's default encodings, in its order, with `DataclassHintsOnce` for JSON."""

    def __init__(self) -> None:
        super().__init__(
            BinaryNullPayloadConverter(),
            BinaryPlainPayloadConverter(),
            JSONProtoPayloadConverter(),
            BinaryProtoPayloadConverter(),
            JSONPlainPayloadConverter(custom_type_converters=[DataclassHintsOnce()]),
        )


DATA_CONVERTER = dataclasses.replace(
    DataConverter.default, payload_converter_class=PayloadConverter
)
