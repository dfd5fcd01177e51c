"""Amounts of money as integer nano-units (10⁻⁹ of the unit prices are declared in).

Prices are declared per million tokens with at most three decimals, so one
token costs a whole number of nano-units and every cost is exact: summed in
SQL on either database, compared with a budget, never rounded. Decimal is used
only at the edges, to read a declared price or budget and to show an amount.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

NANOS_PER_UNIT = 10**9
# A price per million tokens, in nano-units per token: price * 10⁹ / 10⁶.
_NANOS_PER_TOKEN_PER_PRICE = 10**3
MAX_PRICE_DECIMALS = 3
MAX_AMOUNT_DECIMALS = 9


class AmountError(ValueError):
    """Not a non-negative decimal amount with at most the allowed decimals."""


def parse_amount(value: object, *, decimals: int = MAX_AMOUNT_DECIMALS) -> Decimal:
    """A non-negative, finite amount (a decimal string, or a YAML int or float) with
    at most `decimals` decimals."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise AmountError('must be a decimal number, e.g. "3.00"')
    try:
        amount = Decimal(str(value).strip())
    except InvalidOperation:
        raise AmountError(f"{value!r} is not a decimal number") from None
    if not amount.is_finite() or amount < 0:
        raise AmountError("must be a finite amount, zero or more")
    exponent = amount.normalize().as_tuple().exponent
    if isinstance(exponent, int) and -exponent > decimals:
        raise AmountError(f"must have at most {decimals} decimals")
    return amount


def price_nanos_per_token(price_per_million: Decimal) -> int:
    return int(price_per_million * _NANOS_PER_TOKEN_PER_PRICE)


def to_nanos(amount: Decimal) -> int:
    return int(amount * NANOS_PER_UNIT)


def shown(nanos: int) -> str:
    """An amount of nano-units as a decimal string with nine decimals."""
    return f"{Decimal(nanos).scaleb(-9):.9f}"
