"""The demo agent's commands (demo/shell.py): the aggregate output keeps the first
``MAX_OUTPUT_BYTES`` and says how much it leaves out; the streamed output is all of it."""

from __future__ import annotations

from pathlib import Path

from symphony_tui.demo.shell import MAX_OUTPUT_BYTES, cut_notice, run_command


async def test_an_output_cut_short_says_how_many_bytes_are_not_shown(tmp_path: Path) -> None:
    streamed: list[str] = []
    total = MAX_OUTPUT_BYTES + 5000
    code, output = await run_command(f"head -c {total} /dev/zero | tr '\\0' x", tmp_path,
                                     streamed.append)  # fmt: skip
    assert code == 0
    assert output == "x" * MAX_OUTPUT_BYTES + "\n… (5000 more bytes not shown)\n"
    assert "".join(streamed) == "x" * total


async def test_a_short_output_is_whole_and_unmarked(tmp_path: Path) -> None:
    code, output = await run_command("printf 'a\\nb\\n'", tmp_path, lambda _: None)
    assert (code, output) == (0, "a\nb\n")


async def test_a_character_cut_at_the_limit_is_counted_as_not_shown(tmp_path: Path) -> None:
    # "é" is two bytes: one x less than the limit leaves room for half of the first one.
    streamed: list[str] = []
    pad = MAX_OUTPUT_BYTES - 1
    command = f"head -c {pad} /dev/zero | tr '\\0' x; printf 'éé'"
    code, output = await run_command(command, tmp_path, streamed.append)
    assert code == 0
    assert output == "x" * pad + cut_notice(4)
    assert "\ufffd" not in "".join(streamed)  # chunks split inside "é" still decode whole
    assert "".join(streamed).endswith("éé")
