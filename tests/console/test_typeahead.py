"""Keys typed while the console starts are held, not echoed, and the terminal's modes come
back as they were (console/typeahead.py)."""

from __future__ import annotations

import os
import pty
import select
import termios

from symphony_tui.console.typeahead import HeldKeys


def _read_now(fd: int, wait_s: float = 0.2) -> bytes:
    """What ``fd`` has to read within ``wait_s`` (b"" when nothing came)."""
    out = b""
    while select.select([fd], [], [], wait_s)[0]:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        out += chunk
        wait_s = 0.05
    return out


def test_held_keys_are_not_echoed_and_reach_the_program_and_the_modes_come_back():
    master, slave = pty.openpty()
    try:
        before = termios.tcgetattr(slave)
        assert before[3] & termios.ECHO  # a fresh terminal echoes
        with os.fdopen(os.dup(slave), "r") as stream:
            held = HeldKeys(stream)
            lflag = termios.tcgetattr(slave)[3]
            assert not lflag & termios.ECHO and not lflag & termios.ICANON
            assert lflag & termios.ISIG  # Ctrl-C still ends a slow start
            os.write(master, b"\x1b[Aq")  # an arrow key and a letter, typed early
            assert _read_now(master) == b""  # nothing echoed onto the screen
            assert _read_now(slave) == b"\x1b[Aq"  # kept for the console to read
            assert held.before() == before
            held.release()
            held.release()  # idempotent
        assert termios.tcgetattr(slave) == before
        os.write(master, b"x")
        assert _read_now(master) == b"x"  # echo is back
    finally:
        os.close(master)
        os.close(slave)


def test_a_stream_that_is_not_a_terminal_is_left_alone(tmp_path):
    with open(tmp_path / "f", "w+") as stream:
        held = HeldKeys(stream)
        assert held.before() is None
        held.release()
