"""Number types of the settings: whole numbers that refuse ``true``/``false``, and
millisecond durations with an upper bound.

PyYAML reads ``true`` as a boolean and pydantic's lax mode takes a boolean as ``1``, so
``hooks.shutdown_grace_ms: true`` would silently mean one millisecond. A boolean is refused
instead (one line naming the key, as every settings error: config/errors.py). Integer
strings (``timeout_ms: '2500'``) are still taken, as the spec's examples allow (§5.3).

:data:`MAX_MS` bounds every ``*_ms`` key: longer is a typo, and past what the scheduler's
clock arithmetic holds (a deadline ``now + timedelta(...)`` overflows near 2.5e14 ms).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field
from pydantic_core import PydanticCustomError

#: The largest value of any ``*_ms`` setting: 30 days, in milliseconds.
MAX_MS = 30 * 24 * 3600 * 1000


def refuse_boolean(value: Any) -> Any:
    """``value`` unchanged unless it is a boolean (then a one-line validation error)."""
    if isinstance(value, bool):
        raise PydanticCustomError(
            "bool_is_not_a_number",
            "Input should be a whole number, not {value}",
            {"value": str(value).lower()},
        )
    return value


#: A whole number; ``true``/``false`` are refused (not read as 1/0).
WholeNumber = Annotated[int, BeforeValidator(refuse_boolean)]
#: Milliseconds: a :data:`WholeNumber` of at most :data:`MAX_MS`.
Milliseconds = Annotated[int, BeforeValidator(refuse_boolean), Field(le=MAX_MS)]
