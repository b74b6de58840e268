"""Front-matter keys that no setting reads: one warning line each (issue: reference schema).

Unknown keys do not fail a load, so files written for the reference implementation (or a
newer one) still load; but a key nothing reads is almost always a typo or a setting of
another implementation (the reference's ``worker.ssh_hosts``, ``observability.*``), and an
operator who set it should know it has no effect. :func:`unread_keys` lists them by dotted
path, walking the :class:`~symphony_tui.config.settings.Settings` sections; free-form maps
(``env``, ``llm``, ``approval_policy``...) are not walked, ``tracker.provider`` is (only
:data:`~symphony_tui.config.settings.PROVIDER_KEYS` are read there).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from symphony_tui.config.settings import PROVIDER_KEYS, Settings

#: Keys :func:`~symphony_tui.config.settings.resolve_settings` fills itself.
_INTERNAL = frozenset({"workflow_dir"})


def _section_model(annotation: Any) -> type[BaseModel] | None:
    return (
        annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    )


def unread_keys(raw: Mapping[str, Any]) -> list[str]:
    """Dotted paths of the keys of front matter ``raw`` that nothing reads, in file order."""
    out: list[str] = []
    for key, value in raw.items():
        name = str(key)
        field = Settings.model_fields.get(name)
        if field is None or name in _INTERNAL:
            if isinstance(value, Mapping) and value:
                out.extend(f"{name}.{sub}" for sub in value)
            else:
                out.append(name)
            continue
        section = _section_model(field.annotation)
        if section is None or not isinstance(value, Mapping):
            continue  # a wrong type is a validation error, not an unread key
        for sub, nested in value.items():
            path = f"{name}.{sub}"
            if str(sub) not in section.model_fields:
                out.append(path)
            elif name == "tracker" and sub == "provider" and isinstance(nested, Mapping):
                out.extend(f"{path}.{k}" for k in nested if str(k) not in PROVIDER_KEYS)
    return out


def unread_warnings(raw: Mapping[str, Any]) -> tuple[str, ...]:
    """One line per unread key: ``unknown setting <path> is ignored (nothing reads it)``."""
    return tuple(
        f"unknown setting {path} is ignored (nothing reads it)" for path in unread_keys(raw)
    )
