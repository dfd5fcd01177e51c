"""A model profile's token prices (`prices:` in the profiles file)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from app.foundation.money import price_nanos_per_token


@dataclass(frozen=True, slots=True)
class Prices:
    """Nano-units per token (`app.foundation.money`)."""

    input_nanos: int
    output_nanos: int

    @classmethod
    def per_million(cls, input_price: Decimal, output_price: Decimal) -> Prices:
        return cls(price_nanos_per_token(input_price), price_nanos_per_token(output_price))

    def cost_nanos(self, input_tokens: int, output_tokens: int) -> int:
        return input_tokens * self.input_nanos + output_tokens * self.output_nanos
