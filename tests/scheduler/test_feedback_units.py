"""The pure parts of the reactions (scheduler/feedback.py): the log excerpt's bounds and
masking, and the run's branch read from a workspace's git checkout."""

from __future__ import annotations

import subprocess
from pathlib import Path

from symphony_tui.scheduler.feedback import _git_branch, log_excerpt


def test_excerpt_keeps_the_end_within_lines_and_characters() -> None:
    text = "\n".join(f"line {i}" for i in range(1, 101)) + "\n\n"
    assert (
        log_excerpt(text, 3, 1000) == "[97 earlier line(s) not shown]\nline 98\nline 99\nline 100"
    )
    # 20 characters hold two of the last lines ("line 99\n", "line 100\n")
    assert log_excerpt(text, 50, 20) == "[98 earlier line(s) not shown]\nline 99\nline 100"
    assert log_excerpt("", 10, 100) == ""


def test_excerpt_masks_with_the_given_redaction_and_token_shapes() -> None:
    text = "password: hunter2hunter2\nfetch with ghp_abcdefghijklmnopqrstuvwx\nplain"
    out = log_excerpt(text, 10, 1000)
    assert "hunter2hunter2" not in out and "abcdefghijklmnop" not in out
    assert out.endswith("plain")
    assert (
        log_excerpt("my-own-secret here", 5, 100, mask=lambda s: s.replace("my-own-secret", "***"))
        == "*** here"
    )


def test_branch_of_a_workspace_checkout(tmp_path: Path) -> None:
    assert _git_branch(tmp_path) is None  # no checkout

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    assert _git_branch(tmp_path) is None  # main is no issue's branch
    git("checkout", "-q", "-b", "symphony/GH-7")
    assert _git_branch(tmp_path) == "symphony/GH-7"
