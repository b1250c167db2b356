"""DNS-rebinding guard: WSGI middleware that answers 403 to a request whose ``Host`` (or, on a state-changing
request, ``Origin``) names anything but the address the explorer serves.

A web page the user visits can rebind its own name to 127.0.0.1; the browser then sends the page's requests to
the explorer with ``Host: attacker.example``, and the loopback binding alone does not stop them. Checking the
``Host`` header stops every such request (Dash's pages and callbacks, assets, the timeline API, the SQL page):
the middleware wraps the whole Flask app, so no route is left out. Requests other than GET / HEAD / OPTIONS must
also carry no ``Origin`` or one naming an allowed host (a cross-site form post or fetch names its own origin).

Allowed: ``127.0.0.1:PORT``, ``localhost:PORT``, ``[::1]:PORT`` and the bound address itself; for a wildcard bind
(``0.0.0.0``, ``::``) also this machine's host names; plus every ``--allow-host`` (``NAME`` for any port,
``NAME:PORT`` for one; ``*`` turns the check off, e.g. behind a proxy that checks hosts itself).
"""
from __future__ import annotations

import socket
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_WILDCARD = ("0.0.0.0", "::", "")
_BODY = b"403 Forbidden: this neuron-explorer serves %s; the request names another host (%s). If you reach it " \
        b"through a proxy or another name, start it with --allow-host NAME.\n"


def _split(hostport: str) -> tuple[str, int | None]:
    """(lower-case host without brackets, port or None) of ``host[:port]`` / ``[v6]:port``; ("", None) if bad."""
    hostport = hostport.strip().lower()
    try:
        parts = urlsplit("//" + hostport)
        return (parts.hostname or ""), parts.port
    except ValueError:  # a bad port or bracket
        return "", None


class AllowedHosts:
    """The host names (and ports) a request may name; see the module docstring."""

    def __init__(self, bind_host: str, port: int | None, extra: Iterable[str] = ()) -> None:
        self.port = None if port is None else int(port)  # None: any port (create_app, before one is chosen)
        self.any = False
        self.exact: set[tuple[str, int | None]] = set()  # (host, port); port None: any port
        names = list(_LOOPBACK)
        bind = bind_host.strip("[]").lower()
        if bind in _WILDCARD:
            names += [n for n in {socket.gethostname(), socket.getfqdn()} if n]
        else:
            names.append(bind)
        for n in names:
            self.exact.add((n.lower(), self.port))
        for e in extra:
            if e.strip() == "*":
                self.any = True
                continue
            host, p = _split(e)
            if host:
                self.exact.add((host, p))

    def allows(self, hostport: str) -> bool:
        """Whether a ``Host`` value (``name[:port]``; the port defaults to 80) is served here."""
        if self.any:
            return True
        host, port = _split(hostport)
        if not host:
            return False
        port = 80 if port is None else port
        return (host, port) in self.exact or (host, None) in self.exact

    def allows_origin(self, origin: str) -> bool:
        """Whether an ``Origin`` header (``scheme://host[:port]``) names a served host."""
        if self.any:
            return True
        try:
            parts = urlsplit(origin.strip())
            port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False
        host = parts.hostname.lower()
        return (host, port) in self.exact or (host, None) in self.exact

    def describe(self) -> str:
        def one(h: str, p: int | None) -> str:
            return (f"[{h}]" if ":" in h else h) + f":{p if p is not None else '*'}"

        return ", ".join(sorted(one(h, p) for h, p in self.exact))


class HostCheck:
    """WSGI middleware: 403 for a foreign ``Host`` (every method) or ``Origin`` (state-changing methods)."""

    def __init__(self, app: Callable, allowed: AllowedHosts) -> None:
        self.app = app
        self.allowed = allowed

    def __call__(self, environ: dict, start_response: Callable):
        host = environ.get("HTTP_HOST") or ""
        bad = None if self.allowed.allows(host) else f"Host: {host[:100]}"
        if bad is None and environ.get("REQUEST_METHOD", "GET").upper() not in _SAFE_METHODS:
            origin = environ.get("HTTP_ORIGIN")
            if origin is not None and origin != "null" and not self.allowed.allows_origin(origin):
                bad = f"Origin: {origin[:100]}"
            elif origin == "null":  # a sandboxed frame or a file:// page
                bad = "Origin: null"
        if bad is None:
            return self.app(environ, start_response)
        body = _BODY % (self.allowed.describe().encode(), bad.encode("utf-8", "replace"))
        start_response("403 Forbidden", [("Content-Type", "text/plain; charset=utf-8"),
                                         ("Content-Length", str(len(body))), ("Cache-Control", "no-store")])
        return [body]


def protect(server, bind_host: str, port: int | None, extra: Iterable[str] = ()) -> AllowedHosts:
    """Wrap the Flask ``server``'s WSGI app in :class:`HostCheck` (every route, whichever server runs it); called
    again, it replaces the allowed hosts (``create_app`` allows the loopback names on any port, ``neuron-explorer``
    narrows that to the port it serves)."""
    allowed = AllowedHosts(bind_host, port, extra)
    if not isinstance(server.wsgi_app, HostCheck):
        server.wsgi_app = HostCheck(server.wsgi_app, allowed)
    else:
        server.wsgi_app.allowed = allowed
    return allowed
