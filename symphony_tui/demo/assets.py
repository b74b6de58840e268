"""Find the demo files (``WORKFLOW.md``, ``issues.yaml``, ``README.md``) and make a runnable copy.

The files live in ``assets/demo`` of the source tree; the wheel ships them as
``symphony_tui/_assets/demo`` (pyproject ``force-include``). The demo always runs on a fresh
copy because the local tracker writes state changes back into ``issues.yaml`` and workspaces
are created next to ``WORKFLOW.md``.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

ENV_PYTHON = "SYMPHONY_PYTHON"
_PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def demo_assets_dir() -> Path:
    """The folder holding the demo's ``WORKFLOW.md``. Raises ``FileNotFoundError`` if the
    installation lacks it."""
    for candidate in (_PACKAGE_ROOT / "_assets" / "demo", _PACKAGE_ROOT.parent / "assets" / "demo"):
        if (candidate / "WORKFLOW.md").is_file():
            return candidate
    raise FileNotFoundError("the demo files (assets/demo/WORKFLOW.md) are not installed")


def prepare_demo(target: Path | None = None) -> Path:
    """Copy the demo files into ``target`` (a new temporary folder when None; an existing
    ``target`` must be empty or absent) and return the copied ``WORKFLOW.md`` path.

    Workspaces and thread files of earlier runs are never copied. Raises ``FileExistsError``
    when ``target`` is a non-empty folder, ``FileNotFoundError`` when the assets are missing.
    """
    source = demo_assets_dir()
    if target is None:
        target = Path(tempfile.mkdtemp(prefix="symphony-demo-"))
    elif target.exists() and any(target.iterdir()):
        raise FileExistsError(f"{target} is not empty")
    target.mkdir(parents=True, exist_ok=True)
    for name in ("WORKFLOW.md", "issues.yaml", "README.md"):
        if (source / name).is_file():
            shutil.copy2(source / name, target / name)
    return target / "WORKFLOW.md"


def demo_env() -> dict[str, str]:
    """Environment additions for running the demo: the agent runs on this interpreter."""
    return {ENV_PYTHON: sys.executable}
