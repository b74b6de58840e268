"""Which scheduler a project is (docs/fleet.md, "One scheduler, one project").

Two questions, answered from what each side says, never from the text of the targets:

* :func:`designates`: whether a workflow or URL target names a scheduler that ``local``
  found here, before anything is reached, so ``local`` leaves it to that target (which
  keeps its name, however the two race after a restart);
* :class:`Process`: which scheduler process a connected project follows: when it started
  and the workflow it runs (its snapshot's ``started_at``, to the microsecond, and
  ``workflow_path``), and its pid where known. Two projects that follow one process are
  one scheduler written two ways (its workflow and its URL, ``localhost`` and
  ``127.0.0.1``): the fleet shows it once (:func:`rank` says which project keeps it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from symphony_tui.api.auth import is_loopback
from symphony_tui.fleet.targets import Endpoint, Target, host_key

if TYPE_CHECKING:
    from symphony_tui.domain import Snapshot

#: Targets that name one scheduler (the others, ``local`` and ``ssh://``, list every one
#: they find).
NAMING = frozenset({"workflow", "url"})


def url_port(url: str) -> int | None:
    """The port of an ``http(s)://`` URL, the scheme's when none is written (None: none
    can be read)."""
    try:
        parts = urlsplit(url)
        return parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None


def designates(target: Target, endpoint: Endpoint) -> bool:
    """Whether ``target`` names the scheduler ``endpoint`` (one of this machine's, as
    ``local`` found it from its API note): a workflow target the one whose note names that
    workflow (both resolved paths); a URL target the one serving at that address: on a
    loopback host the one whose note announces that port (the note the target's own token
    and process are read from), on another host the one whose note announces that host and
    port. ``local`` and ``ssh://`` targets name none."""
    if target.kind == "workflow":
        return bool(endpoint.workflow_path) and endpoint.workflow_path == target.text
    if target.kind != "url" or endpoint.api_port is None:
        return False
    if url_port(target.text) != endpoint.api_port:
        return False
    host = urlsplit(target.text).hostname or ""
    if is_loopback(host):
        return True
    served = urlsplit(endpoint.url).hostname if endpoint.url else None
    return served is not None and host_key(served) == host_key(host)


@dataclass(frozen=True)
class Process:
    """One scheduler process, as a project's port knows it: ``started_at`` and ``workflow``
    from its snapshot, ``pid`` from its API note (None: not known, a URL on another host)."""

    started_at: datetime
    workflow: str
    pid: int | None = None

    @classmethod
    def of(cls, snapshot: Snapshot, pid: int | None) -> Process | None:
        """The process that sent ``snapshot`` (None before it says when it started)."""
        if snapshot.started_at is None:
            return None
        return cls(snapshot.started_at, snapshot.workflow_path, pid)

    @property
    def key(self) -> tuple[datetime, str]:
        """What two ports of one process share (the pid is not known to every port)."""
        return self.started_at, self.workflow

    def same(self, other: Process | None) -> bool:
        """Whether ``other`` is this process: the same start and workflow, and no two
        different pids."""
        if other is None or other.key != self.key:
            return False
        return self.pid is None or other.pid is None or self.pid == other.pid


def rank(target: Target, order: int) -> tuple[int, int]:
    """Which of two projects of one process keeps it (the lower): a target that names it
    before one that lists what it finds (``local``, ``ssh://``), then the earlier line
    (``order``: the target's place in the fleet's targets)."""
    return (0 if target.kind in NAMING else 1), order
