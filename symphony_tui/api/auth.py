"""Bearer-token authentication for the HTTP API (RFC 6750 ``Authorization: Bearer``).

Rules (docs/http-api.md, "Authentication"):

* A server bound to a non-loopback address needs a token; so does a loopback one when
  ``server.require_token`` is true. Loopback without it stays token-free.
* The token comes from the environment variable named by ``server.auth_token_env``. When
  that names a variable that is unset or empty, the server refuses to start
  (:class:`TokenError`). When no variable is named and a token is needed, one is generated
  (``secrets.token_urlsafe(32)``) and the command line prints it once.
* Every request (the event stream too) must carry it; tokens are compared in constant time
  (``hmac.compare_digest``); a missing or wrong one is 401 and logged with the peer, method
  and path, never the token.
"""

from __future__ import annotations

import hmac
import logging
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


class TokenError(Exception):
    """The server cannot have the token it needs (one line, for the operator)."""


@dataclass(frozen=True)
class TokenChoice:
    """The token a server uses (``None``: token-free loopback) and whether it was generated
    here (then the caller shows it once)."""

    token: str | None
    generated: bool = False


def is_loopback(host: str) -> bool:
    return host.strip().lower() in LOOPBACK_NAMES or host.startswith("127.")


def resolve_token(
    host: str,
    *,
    token_env: str | None = None,
    require_token: bool = False,
    environ: Mapping[str, str] | None = None,
) -> TokenChoice:
    """Pick the token for a server on ``host`` (the rules in the module docstring).

    Raises :class:`TokenError` when ``token_env`` names a variable that is unset or empty."""
    env = os.environ if environ is None else environ
    if token_env:
        value = env.get(token_env, "").strip()
        if not value:
            raise TokenError(
                f"server.auth_token_env names {token_env}, but it is not set: refusing to "
                "serve the HTTP API without its token"
            )
        return TokenChoice(value)
    if require_token or not is_loopback(host):
        return TokenChoice(secrets.token_urlsafe(32), generated=True)
    return TokenChoice(None)


def token_matches(header: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``token`` as a bearer credential;
    constant-time in the token's content."""
    if not header:
        return False
    scheme, _, credential = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(credential.strip().encode("utf-8"), token.encode("utf-8"))


def log_refusal(peer: str | None, method: str, path: str, header: str | None) -> None:
    """One warning line for a refused request; says whether a credential was sent, not what."""
    why = "no bearer token" if not header else "wrong bearer token"
    log.warning("HTTP API: 401 for %s %s from %s (%s)", method, path, peer or "?", why)
