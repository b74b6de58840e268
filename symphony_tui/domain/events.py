"""Normalized agent and scheduler events (spec §10.4, §13).

Backends translate their wire messages into :class:`AgentEvent`; the scheduler stamps
``seq`` (monotonic per process) and keeps a bounded ring of them for the console, the
HTTP API and the JSONL event file.

Wire and JSONL form: the model's JSON, with ``v`` the format version
(:data:`EVENT_FORMAT`). Format 2 carries a typed ``payload`` (see
:mod:`symphony_tui.domain.payloads`); format 1 lines (no ``v``, a free ``data`` object)
still load: their ``data`` is read into the payload of their kind
(:mod:`symphony_tui.domain.event_upgrade`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from symphony_tui.domain.event_upgrade import upgrade_v1
from symphony_tui.domain.kinds import EventKind
from symphony_tui.domain.payloads import Payload

#: The version written in every event's ``v``: 2 = typed ``payload`` (1 had ``data``).
EVENT_FORMAT = 2


class AgentEvent(BaseModel):
    """One event. ``message`` is a short human line (raw agent text; the console sanitizes).

    ``payload`` carries the kind's typed fields (``None`` for kinds that have none, such
    as a tracker or config note). ``issue_id`` is ``None`` for process-wide events.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    v: int = EVENT_FORMAT
    kind: EventKind
    message: str = ""
    issue_id: str | None = None
    issue_identifier: str | None = None
    session_id: str | None = None
    at: datetime | None = None
    seq: int = 0
    payload: Payload | None = None
    #: The fleet console's name for the scheduler this event comes from (None: one
    #: scheduler). Never serialized: it exists only in a fleet console's memory.
    project: str | None = Field(default=None, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, value: Any) -> Any:
        """A format-1 event (no ``v``, a ``data`` object) is read into format 2."""
        if isinstance(value, dict) and "data" in value and "v" not in value:
            return upgrade_v1(value)
        return value
