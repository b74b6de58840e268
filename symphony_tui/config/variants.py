"""Port variants of WORKFLOW.md settings that have one clear meaning (docs/configuration.md,
"Files written for ports of the reference").

Files written for ports of the reference implementation spell some settings differently
from the reference. Where the spelling has one clear meaning it is read as that meaning and
said so in one warning line; where it has none, the load fails with one line naming the key
and what is expected (a ``ValueError``, reported as ``invalid_settings``). The variants read
(each seen in public workflow files, tests/data/workflow_corpus/README.md):

- ``codex.turn_sandbox_policy`` as a bare string (``danger-full-access``,
  ``workspaceWrite``...): the map ``{type: <camelCase name>}`` the app-server expects.
- a hook (``hooks.after_create`` ...) given as ``null`` or ``[]``: no hook; as a list of
  command lines: one ``bash`` script running them in order and stopping at the first that
  fails (``set -e``).
- ``null`` for a setting whose default is not null (``tracker.endpoint: null``,
  ``codex.thread_sandbox: null``): the default.

:func:`read_variants` works on the parsed front matter, before typed validation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

#: Hook settings (spec §5.3.4): scripts run with ``bash -lc`` in the workspace.
HOOK_NAMES = ("after_create", "before_run", "after_run", "before_remove")

#: The app-server's sandbox policy types (``SandboxPolicy.type``) by their kebab-case names,
#: the spelling of ``codex.thread_sandbox`` and of codex's ``--sandbox`` option.
SANDBOX_TYPES = {
    "read-only": "readOnly",
    "workspace-write": "workspaceWrite",
    "danger-full-access": "dangerFullAccess",
    "external-sandbox": "externalSandbox",
}

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _kebab(name: str) -> str:
    """``dangerFullAccess`` / ``danger_full_access`` / ``Danger-Full-Access`` ->
    ``danger-full-access``."""
    return _CAMEL_BOUNDARY.sub("-", name.strip()).replace("_", "-").lower()


def sandbox_policy(value: str) -> dict[str, str]:
    """The policy map for a bare sandbox name. Raises ``ValueError`` (one line) when the name
    is not one of :data:`SANDBOX_TYPES`."""
    kind = SANDBOX_TYPES.get(_kebab(value))
    if kind is None:
        raise ValueError(
            f"codex.turn_sandbox_policy: {value!r} is not a sandbox policy; expected a map "
            f"such as {{type: workspaceWrite}} or one of {', '.join(SANDBOX_TYPES)}"
        )
    return {"type": kind}


def _hook_script(name: str, value: list) -> str | None:
    """A list of command lines as one script (``None`` for an empty list). Raises
    ``ValueError`` for an entry that is not a line of text."""
    lines = []
    for index, item in enumerate(value, 1):
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            raise ValueError(
                f"hooks.{name}: expected a script (text) or a list of command lines; "
                f"entry {index} is {'a map' if isinstance(item, Mapping) else type(item).__name__}"
            )
        if str(item).strip():
            lines.append(str(item))
    if not lines:
        return None
    return "set -e\n" + "\n".join(lines) + "\n"


def _admits_null(field: FieldInfo) -> bool:
    """Whether ``null`` is the field's own default (so writing it changes nothing)."""
    return field.default is None and field.default_factory is None


def _shown_default(field: FieldInfo) -> str:
    default = field.get_default(call_default_factory=True)
    if isinstance(default, BaseModel):
        return "its defaults"
    if isinstance(default, tuple | list):
        return ", ".join(map(str, default)) or "none"
    if default == {}:
        return "none"
    return str(default)


def _read_hooks(section: dict[str, Any], notes: list[str]) -> None:
    for name in HOOK_NAMES:
        if name not in section:
            continue
        value = section[name]
        if value is None:
            del section[name]
            notes.append(f"hooks.{name}: null is read as no hook")
        elif isinstance(value, list):
            script = _hook_script(name, value)
            if script is None:
                del section[name]
                notes.append(f"hooks.{name}: an empty list is read as no hook")
            else:
                section[name] = script
                count = script.count("\n") - 1
                notes.append(
                    f"hooks.{name}: a list of {count} command line{'s' if count != 1 else ''} "
                    "is read as one script that runs each line in order and stops at the "
                    "first that fails"
                )


def _read_sandbox(section: dict[str, Any], notes: list[str]) -> None:
    value = section.get("turn_sandbox_policy")
    if isinstance(value, str):
        policy = sandbox_policy(value)
        section["turn_sandbox_policy"] = policy
        notes.append(
            f"codex.turn_sandbox_policy: the string {value!r} is read as {{type: {policy['type']}}}"
        )


def read_variants(
    raw: Mapping[str, Any], sections: Mapping[str, type[BaseModel]]
) -> tuple[dict[str, Any], list[str]]:
    """``(front matter with port variants rewritten, one warning line per variant read)``.

    ``sections`` maps each top-level settings key to its model (``Settings``' sections).
    ``raw`` is not changed. Raises ``ValueError`` (one line naming the key and what is
    expected) for a variant without one clear meaning.
    """
    out = dict(raw)
    notes: list[str] = []
    for name, value in raw.items():  # file order, so warnings read like the file
        model = sections.get(name)
        if model is None or not isinstance(value, Mapping):
            continue
        section = dict(value)
        if name == "hooks":
            _read_hooks(section, notes)
        elif name == "codex":
            _read_sandbox(section, notes)
        for key, field in model.model_fields.items():
            if key in section and section[key] is None and not _admits_null(field):
                del section[key]
                notes.append(f"{name}.{key}: null is read as the default ({_shown_default(field)})")
        out[name] = section
    return out, notes
