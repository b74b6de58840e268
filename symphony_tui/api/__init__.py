"""The HTTP surface: the spec's ``/api/v1`` endpoints (§13.7) plus control endpoints that carry
the same commands as the console, and a client (:class:`RemotePort`) the console uses to attach
to a headless scheduler."""
