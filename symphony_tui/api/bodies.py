"""Response bodies of ``GET /api/v1/state`` and ``GET /api/v1/snapshot``, serialized once
per snapshot, so the API answers within 250 ms under a flood.

The scheduler publishes a new immutable :class:`~symphony_tui.domain.Snapshot` when its
state changed (``SchedulerState.cached_snapshot``); pollers ask far more often than that
under a light load, and under a flood every poll of every client would otherwise serialize
the same snapshot again on the event loop. :class:`SnapshotBodies` keeps the bytes of the
newest snapshot it was handed and makes them again only for a new snapshot object.

Each body carries an ``ETag`` (this process's nonce and a counter of snapshots seen), so a
client sending ``If-None-Match`` with the current tag gets ``304 Not Modified`` and no body
(RFC 9110 §13.1.2, §15.4.5). The tag changes whenever the snapshot object does, even if
its content came out the same: a 304 is never given for content that changed.
"""

from __future__ import annotations

import json
import os

import orjson

from symphony_tui.domain import Snapshot


class SnapshotBodies:
    """The newest snapshot's serialized bodies: :meth:`state` (the spec's state summary,
    ``Snapshot.state_payload``, orjson) and :meth:`full` (the whole snapshot, pydantic's
    JSON), each made at most once per snapshot; :meth:`etag` names the snapshot."""

    def __init__(self) -> None:
        self._nonce = os.urandom(4).hex()
        self._snap: Snapshot | None = None
        self._count = 0
        self._state: bytes | None = None
        self._full: bytes | None = None

    def _take(self, snap: Snapshot) -> None:
        if snap is not self._snap:  # identity: the scheduler hands out one object per build
            self._snap = snap
            self._count += 1
            self._state = self._full = None

    def etag(self, snap: Snapshot) -> str:
        """The quoted entity tag of ``snap`` (``"<nonce>-<n>"``)."""
        self._take(snap)
        return f'"{self._nonce}-{self._count}"'

    def state(self, snap: Snapshot) -> bytes:
        """``GET /api/v1/state``'s body for ``snap`` (UTF-8 JSON)."""
        self._take(snap)
        if self._state is None:
            payload = snap.state_payload()
            try:
                self._state = orjson.dumps(payload)
            except orjson.JSONEncodeError:  # an agent's raw rate limits beyond 64-bit ints
                self._state = json.dumps(payload).encode()
        return self._state

    def full(self, snap: Snapshot) -> bytes:
        """``GET /api/v1/snapshot``'s body for ``snap`` (``Snapshot.model_dump_json``)."""
        self._take(snap)
        if self._full is None:
            self._full = snap.__pydantic_serializer__.to_json(snap)
        return self._full
