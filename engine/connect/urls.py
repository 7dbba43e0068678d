"""Redis URLs: read and checked in one place, TLS files folded in, credentials kept out
of messages, and the timeouts every connection gets.

``redis+cluster://host:port`` (``rediss+cluster://`` with TLS) names a Redis Cluster by
any of its nodes: :func:`open_client` opens a ``redis.cluster.RedisCluster`` for it.

A URL is the one thing a redisflow process hands another (``redisflow-demo`` to its
agents, the console to its simulated deployment), so everything needed to connect rides in
it: user, password, ``rediss://`` and the TLS files as redis-py query options
(``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile``). :func:`parse_url` reads and checks a
URL before redis-py sees it; its errors (:class:`URLError`) never quote the user info or the
query. Only :func:`redact`'s form is ever printed.

Every connection waits at most :func:`read_timeout` seconds for a reply
(``REDISFLOW_TIMEOUT``, default 10; a URL's ``socket_timeout`` option wins) and keeps TCP
keepalive on, so a frozen or vanished Redis ends a call with ``redis.TimeoutError`` instead
of hanging it. Blocking reads stay below it: pub/sub waits in short slices
(``get_message(timeout=...)``), ``XREAD BLOCK`` in slices of :func:`block_slice_ms`, and an
engine with ``wait_replicas`` waits longer than its ``WAIT``.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

import redis
import redis.connection

from engine.errors import DefinitionError
from engine.store.blocking import block_slice_ms as block_slice_ms  # its home before

TLS_OPTIONS = {"ca": "ssl_ca_certs", "cert": "ssl_certfile", "key": "ssl_keyfile"}
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
TLS_SCHEMES = ("rediss", "rediss+cluster")
SCHEMES = ("redis", "rediss", *CLUSTER_SCHEMES, "unix")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,20}")

TIMEOUT_ENV = "REDISFLOW_TIMEOUT"
DEFAULT_TIMEOUT_S = 10.0  # a reply takes at most this long (each try)
CONNECT_TIMEOUT_S = 5.0  # opening a connection, at most (and at most the read timeout)
HEALTH_CHECK_S = 30  # a connection idle this long is PINGed before it is used again
# TCP keepalive: a peer silent this long is probed; so many unanswered probes drop it
KEEPALIVE = {"TCP_KEEPIDLE": 30, "TCP_KEEPINTVL": 10, "TCP_KEEPCNT": 3}


class URLError(ValueError):
    """A Redis URL that cannot be used. The message names what is wrong and never holds
    the URL's user info or query (where credentials are)."""

    def __init__(self, what: str) -> None:
        super().__init__(f"invalid Redis URL: {what}")


def _plain_options() -> set[str]:
    """Query options redis-py reads from any URL (those of its version)."""
    parsers = cast(dict[str, Any], getattr(redis.connection, "URL_QUERY_ARGUMENT_PARSERS", {}))
    known = {name for name in parsers if not name.startswith("ssl_")}
    return known | {"db", "username", "password", "client_name", "lib_name", "lib_version"}


def _tls_options() -> set[str]:
    """The ``ssl_*`` options of redis-py's TLS connections."""
    import inspect

    params = inspect.signature(redis.connection.SSLConnection.__init__).parameters
    return {name for name in params if name.startswith("ssl_")}


@dataclass(frozen=True)
class RedisURL:
    """A Redis URL, read (:func:`parse_url`). ``password`` and ``options`` are left out of
    its repr; :meth:`redacted` is the form to print."""

    scheme: str
    host: str = ""
    port: int | None = None
    path: str = ""  # unix:// only: the socket
    db: int | None = None  # from the path (or a unix:// URL's ``db`` option)
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    options: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @property
    def cluster(self) -> bool:
        return self.scheme in CLUSTER_SCHEMES

    @property
    def tls(self) -> bool:
        return self.scheme in TLS_SCHEMES

    def redacted(self) -> str:
        """The URL fit to print: the password as ``***`` (the user kept), no query options
        but a unix:// URL's database."""
        auth = ""
        if self.username or self.password:
            auth = quote(self.username or "", safe="") + (":***" if self.password else "") + "@"
        if self.scheme == "unix":
            db = f"?db={self.db}" if self.db else ""
            return f"unix://{auth}{quote(self.path)}{db}"
        host = f"[{self.host}]" if ":" in self.host else quote(self.host, safe=".-_~")
        port = f":{self.port}" if self.port is not None else ""
        db = f"/{self.db}" if self.db is not None else ""
        return f"{self.scheme}://{auth}{host}{port}{db}"


def parse_url(url: str, check_options: bool = True) -> RedisURL:
    """Read ``url`` as redis-py would, refusing with :class:`URLError` what it would
    misread (a password's ``/ ? #`` not percent-encoded, a path that is not a database
    number), refuse with a traceback (an unclosed ``[``) or ignore (an option its
    connection does not take, ``#...``). ``check_options=False`` reads the rest only."""
    if not isinstance(url, str):
        raise URLError("not a string")
    scheme, sep, rest = url.partition("://")
    if not sep or not _SCHEME.fullmatch(scheme):
        raise URLError(
            "expected redis://, rediss://, redis+cluster://, rediss+cluster:// or unix://"
        )
    if scheme not in SCHEMES:  # redis-py reads lower case only
        raise URLError(
            f"unknown scheme {scheme}://: expected redis://, rediss://, redis+cluster://, "
            "rediss+cluster:// or unix://"
        )
    if not rest.isprintable() or " " in rest:
        raise URLError("a space or control character in it (percent-encode it: %20 for a space)")
    end = len(rest)
    for stop in "/?#":
        at = rest.find(stop)
        if at != -1:
            end = min(end, at)
    netloc, after = rest[:end], rest[end:]
    if "@" in after:
        raise URLError(
            "'@' after the host: a user name or password holding / ? or # must "
            "percent-encode them (%2F %3F %23)"
        )
    if "#" in after:
        raise URLError("a '#' in it (in a password, percent-encode it as %23)")
    userinfo, at_sign, hostport = netloc.rpartition("@")
    user: str | None = None
    password: str | None = None
    if at_sign:
        if "[" in userinfo or "]" in userinfo:
            raise URLError("a '[' or ']' in the user name or password: percent-encode it (%5B %5D)")
        name, colon, secret = userinfo.partition(":")
        user = unquote(name) or None
        password = unquote(secret) if colon else None
    path, _, query = after.partition("?")
    host, port = "", None
    db: int | None = None
    if scheme == "unix":
        if hostport:
            raise URLError("a unix:// URL names a socket path: unix:///path/to/redis.sock")
        path = unquote(path)
        if not path.strip("/"):
            raise URLError("a unix:// URL names a socket path: unix:///path/to/redis.sock")
    else:
        host, port = _host_port(hostport)
        if path not in ("", "/"):
            digits = path[1:].rstrip("/")
            if not digits.isdigit() or not digits.isascii():
                raise URLError("the path must be a database number, as in redis://host:6379/0")
            db = int(digits)
        elif path == "/":
            db = 0
        path = ""
        if scheme in CLUSTER_SCHEMES:
            if not host:
                raise URLError("a cluster URL names a node: redis+cluster://host:port")
            if db:
                raise URLError("a cluster has database 0 only")
    try:
        options = tuple(parse_qsl(query, keep_blank_values=True))
    except ValueError:
        raise URLError("a malformed query (?name=value&...)") from None
    if scheme == "unix":
        for name, value in options:
            if name == "db":
                db = _db_option(value)
    parsed = RedisURL(scheme, host, port, path, db, user, password, options)
    if check_options:
        _check_options(parsed)
    return parsed


def _host_port(hostport: str) -> tuple[str, int | None]:
    """The host and port of ``host[:port]`` or ``[v6][:port]``."""
    if hostport.startswith("["):
        close = hostport.find("]")
        if close == -1:
            raise URLError("an IPv6 host without its closing ']', as in redis://[::1]:6379/0")
        host, rest = hostport[1:close], hostport[close + 1 :]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise URLError("the host in [ ] is not an IPv6 address") from None
        if rest and not rest.startswith(":"):
            raise URLError("something after an IPv6 host's ']' other than :port")
        port_text = rest[1:] if rest else None
    else:
        if "]" in hostport:
            raise URLError("a ']' in the host without its '['")
        if hostport.count(":") > 1:
            raise URLError("more than one ':' after the host (an IPv6 host goes in [ ])")
        host, colon, text = hostport.partition(":")
        port_text = text if colon else None
    if port_text is None:
        return unquote(host), None
    if not (port_text.isascii() and port_text.isdigit() and 0 < int(port_text) < 65536):
        raise URLError(
            "the port must be a number from 1 to 65535 (in a password, percent-encode "
            "/ ? # as %2F %3F %23)"
        )
    return unquote(host), int(port_text)


def _db_option(value: str) -> int:
    if not (value.isascii() and value.isdigit()):
        raise URLError("the db option must be a database number")
    return int(value)


def _check_options(parsed: RedisURL) -> None:
    """Refuse an option redis-py's connection for the URL would not take (a TypeError
    while connecting) or could not read. A known option is named, never its value."""
    plain = _plain_options()
    if parsed.scheme == "unix":
        plain -= {"socket_keepalive"}  # a unix socket's connection does not take it
    tls = _tls_options()
    allowed = plain | tls if parsed.tls else plain
    parsers = cast(dict[str, Any], getattr(redis.connection, "URL_QUERY_ARGUMENT_PARSERS", {}))
    for name, value in parsed.options:
        if name not in allowed:
            if name in tls:
                raise URLError(f"{name} is a TLS option: it needs a rediss:// URL")
            # not named: a stray password or token could be what reads as one
            raise URLError(f"an option a {parsed.scheme}:// connection does not take")
        parser = parsers.get(name)
        if name == "db":
            _db_option(value)
            if parsed.cluster and int(value) != 0:
                raise URLError("a cluster has database 0 only")
        elif parser is not None:
            try:
                parser(value)
            except (TypeError, ValueError):
                raise URLError(f"the value of option {name} cannot be read") from None


def is_cluster_url(url: str) -> bool:
    """Whether ``url`` names a Redis Cluster (``redis+cluster://``, ``rediss+cluster://``)."""
    return url.partition("://")[0] in CLUSTER_SCHEMES


def as_cluster_url(url: str) -> str:
    """``url`` as a cluster URL: ``redis://`` becomes ``redis+cluster://``."""
    parsed = parse_url(url, check_options=False)
    if parsed.scheme in ("redis", "rediss"):
        return parsed.scheme + "+cluster" + url[url.index("://") :]
    if parsed.cluster:
        return url
    raise URLError(f"a cluster needs a redis:// or rediss:// URL, not {parsed.scheme}://")


def read_timeout() -> float:
    """How long a reply may take, in seconds: ``REDISFLOW_TIMEOUT``, else 10.
    :class:`DefinitionError` for a value that is not a number above 0."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise DefinitionError(f"{TIMEOUT_ENV} must be a number of seconds above 0")
    return value


def keepalive_options() -> dict[int, int]:
    """TCP keepalive's timings, those this platform lets a socket set."""
    return {
        getattr(socket, name): value for name, value in KEEPALIVE.items() if hasattr(socket, name)
    }


def connection_defaults(timeout: float | None = None, tcp: bool = True) -> dict[str, Any]:
    """What every connection gets unless told otherwise: the read timeout (``timeout``,
    else :func:`read_timeout`), a connect timeout no longer, and over TCP (not a unix
    socket) keepalive."""
    timeout = read_timeout() if timeout is None else timeout
    options: dict[str, Any] = {
        "socket_timeout": timeout,
        "socket_connect_timeout": min(CONNECT_TIMEOUT_S, timeout),
    }
    if tcp:
        options["socket_keepalive"] = True
        options["socket_keepalive_options"] = keepalive_options()
    return options


def open_client(url: str, **options: Any) -> redis.Redis:
    """A client for ``url``: ``redis.Redis``, or for a cluster URL a ``RedisCluster``
    (typed as ``redis.Redis``: the engine uses the commands both share, and asks
    :func:`engine.store.layout.is_cluster` where they differ). The timeouts and
    keepalive of :func:`connection_defaults` apply unless ``options`` (or the URL's
    query) set them; a health check every 30 s unless given. Raises :class:`URLError`
    for a URL :func:`parse_url` refuses."""
    parsed = parse_url(url)
    tcp = parsed.scheme != "unix"
    for name, value in connection_defaults(options.get("socket_timeout"), tcp).items():
        options.setdefault(name, value)
    if not parsed.cluster:
        options.setdefault("health_check_interval", HEALTH_CHECK_S)
        return redis.Redis.from_url(url, **options)
    from redis.cluster import RedisCluster

    plain = parsed.scheme.split("+")[0] + url[url.index("://") :]
    options.pop("health_check_interval", None)
    try:
        return cast(redis.Redis, RedisCluster.from_url(plain, **options))
    except redis.exceptions.RedisClusterException:
        # redis-py reports a user who may not read the slot map as "cluster mode is not
        # enabled": ask the node itself, so a missing permission is named as one
        probe = connection_defaults(options.get("socket_timeout"))
        with redis.Redis.from_url(plain, **probe) as node:
            try:
                node.execute_command("CLUSTER", "SLOTS")
            except redis.exceptions.NoPermissionError:
                raise
            except redis.RedisError:
                pass
        raise


def close_client(client: redis.Redis) -> None:
    """Close ``client`` and its sockets. A cluster client's ``close()`` leaves each node's
    connection pool open (its node clients do not own their pools), so those are
    disconnected here too."""
    client.close()
    get_nodes = getattr(client, "get_nodes", None)
    if get_nodes is not None:
        for node in get_nodes():
            if node.redis_connection is not None:
                node.redis_connection.connection_pool.disconnect()


def not_redis(url: str, error: BaseException) -> str:
    """One line for a server at ``url`` that answered, but not as Redis does."""
    return (
        f"cannot reach Redis at {redact(url)}: something else answers on that port "
        f"(not the Redis protocol: {error})"
    )


def missing_database(url: str, error: BaseException) -> str | None:
    """One line for ``error`` when it is Redis refusing the database ``url`` names (its
    ``SELECT`` out of range), else None."""
    if not isinstance(error, redis.ResponseError) or "DB index is out of range" not in str(error):
        return None
    try:
        db = parse_url(url, check_options=False).db
    except URLError:
        db = None
    which = f"database {db}" if db is not None else "the database the URL names"
    return (
        f"Redis at {redact(url)} has no {which}: a server has databases 0 to 15 unless its "
        "`databases` setting gives more; name one it has in the URL's path (redis://HOST:6379/0)"
    )


def redact(url: str) -> str:
    """``url`` fit to print (:meth:`RedisURL.redacted`): the password as ``***``, no
    query options; for a URL that cannot be read, only its scheme."""
    try:
        return parse_url(url, check_options=False).redacted()
    except URLError:
        scheme = url.partition("://")[0] if isinstance(url, str) and "://" in url else ""
        shown = scheme if _SCHEME.fullmatch(scheme) else "?"
        return f"{shown}://(unreadable URL)"


def with_tls(
    url: str, ca: str | None = None, cert: str | None = None, key: str | None = None
) -> str:
    """``url`` with the given TLS files as query options; raises ValueError unless the URL
    is ``rediss://`` (a TLS option on a plain URL would silently be ignored)."""
    files = {TLS_OPTIONS[k]: v for k, v in (("ca", ca), ("cert", cert), ("key", key)) if v}
    if not files:
        return url
    parsed = parse_url(url, check_options=False)
    parts = urlsplit(url)
    if not parsed.tls:
        raise ValueError(f"TLS options need a rediss:// URL, not {parsed.redacted()}")
    if bool(cert) != bool(key):
        raise ValueError("a TLS client certificate needs its key, and a key its certificate")
    query = "&".join(q for q in (parts.query, urlencode(files)) if q)
    return urlunsplit(parts._replace(query=query))


def user_of(client: redis.Redis) -> str | None:
    """The Redis user ``client`` connects as (``None``: the default user)."""
    from engine.store.layout import is_cluster

    if is_cluster(client):
        client = cast(Any, client).get_default_node().redis_connection
    user = client.connection_pool.connection_kwargs.get("username")
    return str(user) if user else None


def url_of(client: redis.Redis) -> str:
    """The full URL ``client`` connects with, credentials and TLS files included: to hand
    to another process of the same deployment, never to print (see :func:`redact`)."""
    from engine.store.layout import is_cluster

    if is_cluster(client):
        node = cast(Any, client).get_default_node()
        return as_cluster_url(url_of(node.redis_connection)).replace("/0", "", 1)
    kw: dict[str, Any] = client.connection_pool.connection_kwargs
    db = kw.get("db", 0)
    cls = client.connection_pool.connection_class
    query = {k: v for k, v in kw.items() if k.startswith("ssl_") and isinstance(v, str | int)}
    user, password = kw.get("username"), kw.get("password")
    auth = ""
    if user or password:
        auth = quote(user or "", safe="") + (f":{quote(password, safe='')}" if password else "")
        auth += "@"
    if "path" in kw:
        return f"unix://{auth}{kw['path']}?db={db}"
    tls = isinstance(cls, type) and issubclass(cls, redis.SSLConnection)
    where = f"{kw.get('host', '127.0.0.1')}:{kw.get('port', 6379)}/{db}"
    url = f"{'rediss' if tls else 'redis'}://{auth}{where}"
    return f"{url}?{urlencode(query)}" if query else url
