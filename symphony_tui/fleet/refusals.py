"""The lines a command for a fleet project that cannot take it is refused with. A stale
one's: the fleet port says it instead of sending (the request would wait out its
timeout), and a console says it before asking the operator anything; a lost one's (its
scheduler gone without a word): the fleet port says it (docs/fleet.md)."""

from __future__ import annotations


def stale_refusal(project: str, age_s: float | None) -> str:
    """``api is stale (no word from it for 12 s): not sent; send it again once it is live``;
    ``age_s``: seconds since ``project``'s scheduler was last heard from (None: not said)."""
    silent = f" for {int(age_s)} s" if age_s is not None else ""
    return f"{project} is stale (no word from it{silent}): not sent; send it again once it is live"


def lost_refusal(project: str, reason: str | None) -> str:
    """``api is lost (its process no longer serves): not sent; ...``: ``project``'s
    scheduler is gone without saying it stopped (``reason``, one line; None: not said)."""
    why = f" ({reason})" if reason else ""
    return f"{project} is lost{why}: not sent; send it again once it is started and live"
