"""Redis URLs: TLS files folded in, credentials kept out of messages.

A URL is the one thing a redisflow process hands another (``redisflow-demo`` to its
agents, the console to its simulated deployment), so everything needed to connect rides in
it: user, password, ``rediss://`` and the TLS files as redis-py query options
(``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile``). Only :func:`redact`'s form is ever
printed.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

import redis

TLS_OPTIONS = {"ca": "ssl_ca_certs", "cert": "ssl_certfile", "key": "ssl_keyfile"}
_USERINFO = re.compile(r"^([a-z]+://)([^@/?#]*)@")


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
    if parts.scheme != "rediss":
        raise ValueError(f"TLS options need a rediss:// URL, not {redact(url)}")
    if bool(cert) != bool(key):
        raise ValueError("a TLS client certificate needs its key, and a key its certificate")
    query = "&".join(q for q in (parts.query, urlencode(files)) if q)
    return urlunsplit(parts._replace(query=query))


def url_of(client: redis.Redis) -> str:
    """The full URL ``client`` connects with, credentials and TLS files included: to hand
    to another process of the same deployment, never to print (see :func:`redact`)."""
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
