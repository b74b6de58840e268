"""The line a command for a stale fleet project is refused with: the fleet port says it
instead of sending (the request would wait out its timeout), and a console says it
before asking the operator anything (docs/fleet.md)."""

from __future__ import annotations


def stale_refusal(project: str, age_s: float | None) -> str:
    """``api is stale (no word from it for 12 s): not sent; send it again once it is live``;
    ``age_s``: seconds since ``project``'s scheduler was last heard from (None: not said)."""
    silent = f" for {int(age_s)} s" if age_s is not None else ""
    return f"{project} is stale (no word from it{silent}): not sent; send it again once it is live"
