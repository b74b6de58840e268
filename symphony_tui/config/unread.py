"""Front-matter keys that no setting reads: one warning line each.

Unknown keys do not fail a load, so files written for the reference implementation (or a
newer one) still load; but a key nothing reads is almost always a typo or a setting of
another implementation (the reference's ``observability.*``), and an
operator who set it should know it has no effect. :func:`unread_keys` lists them by dotted
path, walking the :class:`~symphony_tui.config.settings.Settings` sections; free-form maps
(``env``, ``llm``, ``approval_policy``...) are not walked, ``tracker.provider`` is (only
:data:`~symphony_tui.config.settings.PROVIDER_KEYS` are read there), and so is the GitHub
board's ``tracker.project``, the ``github`` sub-sections (``reactions``...) and each
host's ``worker.hosts.<entry>``.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from symphony_tui.config import rest_trackers
from symphony_tui.config.settings import PROVIDER_KEYS, GitHubProjectSettings, Settings
from symphony_tui.config.worker_hosts import HostOverrides

#: Keys :func:`~symphony_tui.config.settings.resolve_settings` fills itself.
_INTERNAL = frozenset({"workflow_dir"})


def _section_model(annotation: Any) -> type[BaseModel] | None:
    return (
        annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    )


def _close(word: str, known: tuple[str, ...]) -> str | None:
    """The key of ``known`` closest to ``word`` (``difflib`` ratio >= 0.75), or None."""
    match = difflib.get_close_matches(word, known, n=1, cutoff=0.75)
    return match[0] if match else None


def _unread(raw: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """``(dotted path, did-you-mean path or None)`` for each unread key, in file order."""
    top = tuple(k for k in Settings.model_fields if k not in _INTERNAL)
    out: list[tuple[str, str | None]] = []
    for key, value in raw.items():
        name = str(key)
        field = Settings.model_fields.get(name)
        if field is None or name in _INTERNAL:
            guess = _close(name, top)
            if isinstance(value, Mapping) and value:
                out.extend((f"{name}.{sub}", f"{guess}.{sub}" if guess else None) for sub in value)
            else:
                out.append((name, guess))
            continue
        section = _section_model(field.annotation)
        if section is None or not isinstance(value, Mapping):
            continue  # a wrong type is a validation error, not an unread key
        for sub, nested in value.items():
            path = f"{name}.{sub}"
            if str(sub) not in section.model_fields:
                keys = tuple(section.model_fields)
                if name == "tracker":  # not another tracker kind's own keys
                    foreign = rest_trackers.foreign_keys(value.get("kind"))
                    keys = tuple(k for k in keys if k not in foreign)
                guess = _close(str(sub), keys)
                out.append((path, f"{name}.{guess}" if guess else None))
            elif name == "tracker" and sub == "provider" and isinstance(nested, Mapping):
                foreign = rest_trackers.foreign_keys(value.get("kind"))
                for k in nested:
                    if str(k) not in PROVIDER_KEYS:
                        guess = _close(str(k), tuple(p for p in PROVIDER_KEYS if p not in foreign))
                        out.append((f"{path}.{k}", f"{path}.{guess}" if guess else None))
            elif name == "github" and isinstance(nested, Mapping):
                inner = _section_model(section.model_fields[str(sub)].annotation)
                keys = tuple(inner.model_fields) if inner is not None else ()
                for k in nested:
                    if str(k) not in keys:
                        guess = _close(str(k), keys)
                        out.append((f"{path}.{k}", f"{path}.{guess}" if guess else None))
            elif name == "tracker" and sub == "project" and isinstance(nested, Mapping):
                keys = tuple(GitHubProjectSettings.model_fields)
                for k in nested:
                    if str(k) not in keys:
                        guess = _close(str(k), keys)
                        out.append((f"{path}.{k}", f"{path}.{guess}" if guess else None))
            elif name == "worker" and sub == "hosts" and isinstance(nested, Mapping):
                keys = tuple(HostOverrides.model_fields)
                for host, own in nested.items():
                    if not isinstance(own, Mapping):
                        continue  # a wrong type is a validation error
                    for k in own:
                        if str(k) not in keys:
                            guess = _close(str(k), keys)
                            where = f"{path}.{host}"
                            out.append((f"{where}.{k}", f"{where}.{guess}" if guess else None))
    return out


def unread_keys(raw: Mapping[str, Any]) -> list[str]:
    """Dotted paths of the keys of front matter ``raw`` that nothing reads, in file order."""
    return [path for path, _guess in _unread(raw)]


def unread_warnings(raw: Mapping[str, Any]) -> tuple[str, ...]:
    """One line per unread key: ``unknown setting <path> is ignored (nothing reads it)``,
    with ``; did you mean <path>?`` when a key read at the same level is a close spelling
    (``agnet.max_turns`` -> ``agent.max_turns``)."""
    lines = []
    for path, guess in _unread(raw):
        line = f"unknown setting {path} is ignored (nothing reads it)"
        lines.append(f"{line}; did you mean {guess}?" if guess else line)
    return tuple(lines)
