"""An HTTP backend's session on the scheduler's managed local server is adoptable: that
server records itself for the next scheduler to take over, so the start-up reaper must not
end its process group (the run's ``agent_group`` record says so). A session on a server
given by ``base_url`` (no ``pid`` here) is not, and neither is a closed one."""

from __future__ import annotations

from typing import Any

from symphony_tui.agents.http_session import HttpServerSession


class _Session(HttpServerSession):
    def _start_turn(self) -> bool:
        return False

    async def _send_prompt(self, prompt: str) -> None:
        return None

    async def _follow_turn(self, adopted: bool) -> Any:
        raise NotImplementedError

    def _end_of_turn(self) -> tuple[str | None, bool]:
        return None, False

    async def _stop_run(self) -> None:
        return None

    async def _release(self) -> None:
        return None

    def _malformed_total(self) -> int:
        return 0


def _session(pid: int | None) -> _Session:
    no_host: Any = None  # adoptable reads neither the host nor the client
    return _Session(no_host, None, "ses_1", pid=pid, request_timeout_s=1.0)


def test_a_session_on_the_managed_local_server_is_adoptable() -> None:
    assert _session(4242).adoptable is True


def test_a_session_on_a_server_given_by_url_is_not() -> None:
    assert _session(None).adoptable is False


async def test_a_closed_session_is_not() -> None:
    session = _session(4242)
    session._closed = True
    assert session.adoptable is False
