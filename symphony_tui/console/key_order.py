"""Keys are handled in the order they were typed, also when one terminal read brings several.

Textual's ``App.on_event`` runs a priority binding as its key arrives but hands every other
key to the focused widget's message queue, where it is handled later. So with ``q`` and
``/`` read at once (fast typing, a paste, an SSH burst), ``/`` (a priority binding: it
focuses the filter at once, see registry.py) would run first and ``q``, handled after,
would find the filter focused: the quit would be lost. :class:`KeyOrder` holds a key
that arrives while a key handed to a widget is still on its way, and lets it go once that
one was handled: :class:`KeyHandled` is posted right behind the handed-over key to the
same widget and bubbles up the same path, so it reaches the app after the key went all
the way up (or was stopped). Should it never arrive (its widget removed meanwhile), the
held keys go after :data:`RELEASE_AFTER_S` anyway.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from textual import events
from textual.message import Message

if TYPE_CHECKING:
    from textual.message_pump import MessagePump
    from textual.timer import Timer

#: Seconds after which held keys go on without their predecessor's :class:`KeyHandled`.
RELEASE_AFTER_S = 1.0


class KeyHandled(Message):
    """Behind a key handed to a widget: at the app, that key has been handled."""

    def __init__(self, key: events.Key) -> None:
        super().__init__()
        self.key = key


class KeyOrder:
    """Key events handled one after another (see the module doc), for one app.

    ``deliver``: Textual's own handling of a key event (``App.on_event``); ``target``: the
    node a key handed over went to (the focused widget, else the screen); ``set_timer``:
    the app's ``set_timer``. The app gives every key event that is not forwarded to
    :meth:`arrived`, and every :class:`KeyHandled` to :meth:`handled`."""

    def __init__(
        self,
        deliver: Callable[[events.Key], Awaitable[None]],
        target: Callable[[], MessagePump],
        set_timer: Callable[[float, Callable[[], Awaitable[None]]], Timer],
    ) -> None:
        self._deliver = deliver
        self._target = target
        self._set_timer = set_timer
        self._key_on_its_way: events.Key | None = None
        self._keys_held: deque[events.Key] = deque()
        self._release_timer: Timer | None = None

    async def arrived(self, event: events.Key) -> None:
        """Handle ``event`` now, or hold it while a key before it is on its way."""
        if self._key_on_its_way is not None:
            self._keys_held.append(event)
            return
        await self._handle_key(event)

    async def _handle_key(self, event: events.Key) -> None:
        await self._deliver(event)
        if event.is_forwarded:  # handed to a widget: it is handled later, on its queue
            self._key_on_its_way = event
            self._target().post_message(KeyHandled(event))
            if self._release_timer is not None:
                self._release_timer.stop()
            self._release_timer = self._set_timer(RELEASE_AFTER_S, self._release_keys)

    async def handled(self, message: KeyHandled) -> None:
        message.stop()
        if message.key is self._key_on_its_way:
            await self._release_keys()

    async def _release_keys(self) -> None:
        """The key on its way was handled (or is taken as such): the held keys go on, in
        order, until one is handed to a widget again."""
        self._key_on_its_way = None
        if self._release_timer is not None:
            self._release_timer.stop()
            self._release_timer = None
        held = self._keys_held
        while held and self._key_on_its_way is None:
            await self._handle_key(held.popleft())
