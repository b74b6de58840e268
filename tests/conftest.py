"""Suite-wide isolation.

Every test process gets a private, empty ``HOME``: platformdirs (logs, state, locks) then
write under it instead of the developer's folders, and ``bash -lc`` (hooks, agent launch)
does not run the user's login scripts. Those scripts are slow on some machines: a pyenv
``rehash`` that was interrupted once leaves a lock file that makes every later login shell
wait 60 s. The pinned agent programs are looked up in the real home's cache first.

The suite runs on two pytest-xdist workers (README's test command, ``--dist loadgroup``
from ``pyproject.toml``): each worker is a test process of its own (its own ``HOME``, its
own ``tmp_path`` root), and the tests whose markers are in :data:`SERIAL_GROUPS` run one
after another on one worker, never beside each other.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

#: marker -> the ``xdist_group`` its tests share: the real agent-server runs over SSH look
#: for their private tmux folders among every ``/tmp/sym-oh-*``, and each openhands server
#: takes a good part of a core while it starts.
SERIAL_GROUPS = {"real_openhands": "openhands"}

_REAL_HOME = Path.home()
_CACHE = _REAL_HOME / ".cache" / "symphony-tui"


def pytest_configure(config) -> None:
    codex = _CACHE / "codex-0.171.0" / "node_modules" / ".bin" / "codex"
    if "SYMPHONY_CODEX_BIN" not in os.environ and codex.exists():
        os.environ["SYMPHONY_CODEX_BIN"] = str(codex)
    venv = _CACHE / "openhands-1.58.2"
    if "SYMPHONY_OPENHANDS_VENV" not in os.environ and (venv / "bin" / "python").exists():
        os.environ["SYMPHONY_OPENHANDS_VENV"] = str(venv)
    home = Path(tempfile.mkdtemp(prefix="symphony-test-home-"))
    os.environ["HOME"] = str(home)
    for var in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"):
        os.environ.pop(var, None)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    # tryfirst: pytest-xdist reads the group marker in its own hook, after this one.
    for item in items:
        for marker, group in SERIAL_GROUPS.items():
            if item.get_closest_marker(marker) and not item.get_closest_marker("xdist_group"):
                item.add_marker(pytest.mark.xdist_group(group))
