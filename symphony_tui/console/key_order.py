"""Keys are handled in the order they were typed, also when one terminal read brings several.

Textual's ``App.on_event`` runs a priority binding as its key arrives but hands every other
key to the focused widget's message queue, where it is handled later. So with ``q`` and
``/`` read at once (fast typing, a paste, an SSH burst), ``/`` (a priority binding: it
focuses the filter at once, see registry.py) would run first and ``q``, handled after,
would find the filter focused: the quit would be lost. :class:`KeyOrderMixin` holds a key
that arrives while a key handed to a widget is still on its way, and lets it go once that
one was handled: :class:`KeyHandled` is posted right behind the handed-over key to the
same widget and bubbles up the same path, so it reaches the app after the key went all
the way up (or was stopped). Should it never arrive (its widget removed meanwhile), the
held keys go after :data:`RELEASE_AFTER_S` anyway.
"""

from __future__ import annotations

from collections import deque

from textual import events
from textual.message import Message
from textual.timer import Timer

#: Seconds after which held keys go on without their predecessor's :class:`KeyHandled`.
RELEASE_AFTER_S = 1.0


class KeyHandled(Message):
    """Behind a key handed to a widget: at the app, that key has been handled."""

    def __init__(self, key: events.Key) -> None:
        super().__init__()
        self.key = key


class KeyOrderMixin:
    """For ``SymphonyApp``: key events handled one after another (see the module doc)."""

    _key_on_its_way: events.Key | None = None
    _keys_held: deque[events.Key] | None = None
    _key_release_timer: Timer | None = None

    async def on_event(self, event: events.Event) -> None:
        if not isinstance(event, events.Key) or event.is_forwarded:
            await super().on_event(event)  # type: ignore[misc]  # a mixin: super() is the App
            return
        if self._key_on_its_way is not None:
            if self._keys_held is None:
                self._keys_held = deque()
            self._keys_held.append(event)
            return
        await self._handle_key(event)

    async def _handle_key(self, event: events.Key) -> None:
        await super().on_event(event)  # type: ignore[misc]  # a mixin: super() is the App
        if event.is_forwarded:  # handed to a widget: it is handled later, on its queue
            self._key_on_its_way = event
            target = self.focused or self.screen  # type: ignore[attr-defined]  # the App's
            target.post_message(KeyHandled(event))
            if self._key_release_timer is not None:
                self._key_release_timer.stop()
            self._key_release_timer = self.set_timer(  # type: ignore[attr-defined]  # the App's
                RELEASE_AFTER_S, self._release_keys
            )

    async def on_key_handled(self, message: KeyHandled) -> None:
        message.stop()
        if message.key is self._key_on_its_way:
            await self._release_keys()

    async def _release_keys(self) -> None:
        """The key on its way was handled (or is taken as such): the held keys go on, in
        order, until one is handed to a widget again."""
        self._key_on_its_way = None
        if self._key_release_timer is not None:
            self._key_release_timer.stop()
            self._key_release_timer = None
        held = self._keys_held
        while held and self._key_on_its_way is None:
            await self._handle_key(held.popleft())
