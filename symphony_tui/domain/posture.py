"""What an agent run can reach (docs/security.md): its secrets, sandbox, network and
transport, and whether it can reach the scheduler's control API. Worker detail and
``GET /api/v1/<issue>`` show it; :mod:`symphony_tui.scheduler.posture` builds it at
dispatch from the settings of that moment."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class RunPosture(BaseModel):
    """``secrets_withheld``: names of the scheduler's secret variables that are set here and
    were removed from the agent's and hooks' environment (names only, never values).
    ``sandbox``: the kind (``codex workspace-write``, ``none``...); ``sandbox_policy``: its
    settings in one line; ``network``: the agent's network stance in one line;
    ``transport``: how the scheduler talks to the agent; ``control_api``: whether the run
    can reach the control API, and what guards it, in one line."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    secrets_withheld: tuple[str, ...] = ()
    sandbox: str = ""
    sandbox_policy: str = ""
    network: str = ""
    transport: str = ""
    control_api: str = ""

    def lines(self) -> list[tuple[str, str]]:
        """``(label, text)`` rows for a detail view."""
        sandbox = f"{self.sandbox} ({self.sandbox_policy})" if self.sandbox_policy else ""
        return [
            ("secrets withheld", ", ".join(self.secrets_withheld) or "none set here"),
            ("sandbox", sandbox or self.sandbox),
            ("network", self.network),
            ("transport", self.transport),
            ("control API", self.control_api),
        ]
