"""Safe exposure of the HTTP transport: the bearer token and the SDK's DNS-rebinding settings.

The MCP SDK does the HTTP work (its BearerAuthBackend answers 401, its TransportSecurityMiddleware
checks Host and Origin, its body limit answers 413); this module only configures those hooks. A
server bound to anything but loopback is reachable by other machines, so it refuses to start without
a token; on loopback a token is optional but enforced when given.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from pathlib import Path

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings

TOKEN_ENV_VAR = "ESP32_DOCS_TOKEN"
MIN_TOKEN_CHARS = 16
# tool arguments are a query of at most 2000 characters and a few scalars; 64 KiB is ample
MAX_REQUEST_BODY_BYTES = 64 * 1024
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


class ExposureError(ValueError):
    """The HTTP options would expose the server unsafely; the message says what to pass."""


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (127.0.0.0/8, ::1), the only binds safe without a token."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def load_token(token_file: str | None) -> str | None:
    """The bearer token from --token-file, else $ESP32_DOCS_TOKEN, else None; never echoed anywhere."""
    if token_file:
        try:
            token = Path(token_file).read_text(encoding="utf-8").strip()
        except OSError as error:
            raise ExposureError(f"cannot read --token-file {token_file}: {error.strerror}") from error
        source = f"--token-file {token_file}"
    elif os.environ.get(TOKEN_ENV_VAR) is not None:
        token = os.environ[TOKEN_ENV_VAR].strip()
        source = f"${TOKEN_ENV_VAR}"
    else:
        return None
    if len(token) < MIN_TOKEN_CHARS or any(ch.isspace() for ch in token):
        raise ExposureError(
            f"the token from {source} must be at least {MIN_TOKEN_CHARS} characters without whitespace, "
            "e.g. the output of: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    return token


def require_token_off_loopback(host: str, token: str | None) -> None:
    """Refuse a non-loopback bind without a token: anyone on the network could otherwise call it."""
    if token is None and not is_loopback(host):
        raise ExposureError(
            f"--host {host} is reachable from other machines: give a bearer token with --token-file FILE "
            f"or ${TOKEN_ENV_VAR} (or bind --host 127.0.0.1)"
        )


class StaticTokenVerifier:
    """The SDK's TokenVerifier for one shared team token, compared in constant time."""

    def __init__(self, token: str) -> None:
        self._expected = token.encode("utf-8")

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode("utf-8", "surrogatepass"), self._expected):
            # the access token the SDK keeps in request context never carries the secret itself
            return AccessToken(token="team-token", client_id="team", scopes=[])
        return None


def auth_settings(host: str, port: int) -> AuthSettings:
    """Resource-server-only settings: the SDK requires an issuer URL; no OAuth routes are mounted."""
    return AuthSettings(issuer_url=f"http://{url_host(host)}:{port}", resource_server_url=None)


def url_host(host: str) -> str:
    """How a host appears in a Host header or URL: IPv6 addresses in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def transport_security(host: str, allowed_hosts: list[str]) -> TransportSecuritySettings:
    """DNS-rebinding protection, on loopback too: only these Host headers and http(s) Origins pass.

    A wildcard bind (0.0.0.0, ::) is reached under names the server cannot know, so those come from
    --allowed-host; a specific address is allowed as itself.
    """
    names = [*LOOPBACK_NAMES]
    if not is_loopback(host) and host not in ("0.0.0.0", "::"):
        names.append(url_host(host))
    names.extend(url_host(name) for name in allowed_hosts)
    hosts: list[str] = []
    origins: list[str] = []
    for name in dict.fromkeys(names):
        hosts += [name, f"{name}:*"]
        origins += [f"{scheme}://{name}{port}" for scheme in ("http", "https") for port in ("", ":*")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )
