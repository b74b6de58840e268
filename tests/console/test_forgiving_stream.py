"""After a hang-up the exit message and last stderr lines go nowhere instead of failing the
exit (``console/terminal_watch.py`` ``Forgiving``)."""

from __future__ import annotations

import errno
import io
import sys

from symphony_tui.console.terminal_watch import Forgiving


class HungUpTty(io.StringIO):
    def write(self, text: str) -> int:
        raise OSError(errno.EIO, "Input/output error")

    def flush(self) -> None:
        raise OSError(errno.EIO, "Input/output error")


def test_writes_to_a_hung_up_terminal_are_dropped():
    out = Forgiving(HungUpTty())
    assert out.write("hangup: workers stopped\n") == len("hangup: workers stopped\n")
    out.flush()  # no OSError


def test_by_default_it_writes_to_the_stderr_of_the_moment(monkeypatch):
    out = Forgiving()
    first, second = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    out.write("one")
    monkeypatch.setattr(sys, "stderr", second)  # (Textual swaps stderr while it runs)
    out.write("two")
    assert first.getvalue() == "one" and second.getvalue() == "two"
