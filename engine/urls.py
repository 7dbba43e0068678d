"""Redis URLs: TLS files folded in, credentials kept out of messages.

``redis+cluster://host:port`` (``rediss+cluster://`` with TLS) names a Redis Cluster by
any of its nodes: :func:`open_client` opens a ``redis.cluster.RedisCluster`` for it.

A URL is the one thing a redisflow process hands another (``redisflow-demo`` to its
agents, the console to its simulated deployment), so everything needed to connect rides in
it: user, password, ``rediss://`` and the TLS files as redis-py query options
(``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile``). Only :func:`redact`'s form is ever
printed.
"""

from __future__ import annotations

import re
from typing import Any, cast
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

import redis

TLS_OPTIONS = {"ca": "ssl_ca_certs", "cert": "ssl_certfile", "key": "ssl_keyfile"}
_USERINFO = re.compile(r"^([a-z+]+://)([^@/?#]*)@")
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")


def is_cluster_url(url: str) -> bool:
    """Whether ``url`` names a Redis Cluster (``redis+cluster://``, ``rediss+cluster://``)."""
    return urlsplit(url).scheme in CLUSTER_SCHEMES


def as_cluster_url(url: str) -> str:
    """``url`` as a cluster URL: ``redis://`` becomes ``redis+cluster://``."""
    parts = urlsplit(url)
    if parts.scheme in ("redis", "rediss"):
        return urlunsplit(parts._replace(scheme=parts.scheme + "+cluster"))
    if parts.scheme in CLUSTER_SCHEMES:
        return url
    raise ValueError(f"a cluster needs a redis:// or rediss:// URL, not {redact(url)}")


def open_client(url: str, **options: Any) -> redis.Redis:
    """A client for ``url``: ``redis.Redis``, or for a cluster URL a ``RedisCluster``
    (typed as ``redis.Redis``: the engine uses the commands both share, and asks
    :func:`engine.store.layout.is_cluster` where they differ). Raises ValueError for a
    URL redis-py cannot read."""
    if not is_cluster_url(url):
        return redis.Redis.from_url(url, **options)
    from redis.cluster import RedisCluster

    parts = urlsplit(url)
    if not parts.hostname:
        raise ValueError("a cluster URL names a node: redis+cluster://host:port")
    plain = urlunsplit(parts._replace(scheme=parts.scheme.split("+")[0]))
    options.pop("health_check_interval", None)
    try:
        return cast(redis.Redis, RedisCluster.from_url(plain, **options))
    except redis.exceptions.RedisClusterException:
        # redis-py reports a user who may not read the slot map as "cluster mode is not
        # enabled": ask the node itself, so a missing permission is named as one
        with redis.Redis.from_url(plain, socket_connect_timeout=5) as node:
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


def redact(url: str) -> str:
    """``url`` fit to print: the password as ``***`` (the user kept), no query options."""
    url = url.split("?", 1)[0].split("#", 1)[0]
    m = _USERINFO.match(url)
    if m is None:
        return url
    user, sep, _ = m.group(2).partition(":")
    return f"{m.group(1)}{user}{':***' if sep else ''}@{url[m.end() :]}"


def with_tls(
    url: str, ca: str | None = None, cert: str | None = None, key: str | None = None
) -> str:
    """``url`` with the given TLS files as query options; raises ValueError unless the URL
    is ``rediss://`` (a TLS option on a plain URL would silently be ignored)."""
    files = {TLS_OPTIONS[k]: v for k, v in (("ca", ca), ("cert", cert), ("key", key)) if v}
    if not files:
        return url
    parts = urlsplit(url)
    if parts.scheme not in ("rediss", "rediss+cluster"):
        raise ValueError(f"TLS options need a rediss:// URL, not {redact(url)}")
    if bool(cert) != bool(key):
        raise ValueError("a TLS client certificate needs its key, and a key its certificate")
    query = "&".join(q for q in (parts.query, urlencode(files)) if q)
    return urlunsplit(parts._replace(query=query))


def url_of(client: redis.Redis) -> str:
    """The full URL ``client`` connects with, credentials and TLS files included: to hand
    to another process of the same deployment, never to print (see :func:`redact`)."""
    from .store.layout import is_cluster

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
