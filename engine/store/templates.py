"""Templates in Redis: named, versioned workflow files (shard 0), and their runs' counts.

A template keeps every version's text as it was put (YAML or JSON, any format the loader
reads), so ``template show`` prints what was written and a run loads exactly that.
"""

from __future__ import annotations

import hashlib
from typing import Any, cast

import redis

from engine.core.model import TemplateInfo

from ..errors import NotFoundError
from .keys import Keyspace
from .scripts import Call, Scripts


def _version(reply: Any) -> tuple[int, bool]:
    return int(reply[0]), bool(int(reply[1]))


class Templates:
    """Put, read and remove templates (the Redis half of :meth:`Engine.put_template`)."""

    def __init__(self, client: redis.Redis, keys: Keyspace, scripts: Scripts, event_cap: int):
        self.redis = client
        self.keys = keys
        self.scripts = scripts
        self.event_cap = event_cap
        self.home = keys.shard(0)

    def put(self, name: str, text: str, source: str) -> tuple[int, bool]:
        """Store ``text`` as the next version of ``name`` unless it is the latest's:
        ``(version, whether it is new)``."""
        sha = hashlib.sha1(text.encode()).hexdigest()
        args = [self.home.prefix, self.event_cap, name, text, source, sha]
        keys = [self.home.template(name), self.home.templates]
        return self.scripts.run(Call("template", keys, args, _version))

    def latest(self, name: str) -> int:
        """The latest version of ``name`` (:class:`NotFoundError` if there is none)."""
        v = self.redis.hget(self.home.template(name), "v")
        if v is None:
            raise NotFoundError(f"no template named {name!r} (see `redisflow template list`)")
        return int(cast(str, v))

    def get(self, name: str, version: int | None = None) -> TemplateInfo:
        """One version of a template (its latest by default), text included."""
        key = self.home.template(name)
        latest = self.latest(name)
        v = latest if version is None else version
        text, source, put = self.redis.hmget(key, [str(v), f"{v}f", f"{v}t"])
        if text is None:
            raise NotFoundError(f"template {name!r} has no version {v} (versions 1 to {latest})")
        return TemplateInfo(
            name, v, latest, float(cast(str, put)) / 1000.0, cast(str, source),
            self.runs([name])[name], cast(str, text),
        )  # fmt: skip

    def text(self, name: str, version: int) -> str | None:
        """The text of one version, or None."""
        return cast("str | None", self.redis.hget(self.home.template(name), str(version)))

    def runs(self, names: list[str]) -> dict[str, int]:
        """How many runs of each template were pushed (all shards summed)."""
        total = dict.fromkeys(names, 0)
        if not names:
            return total
        pipe = self.redis.pipeline(transaction=False)
        for shard in self.keys.all_shards():
            pipe.hmget(shard.template_runs, names)
        for counts in pipe.execute():
            for n, c in zip(names, counts, strict=True):
                total[n] += int(c or 0)
        return total

    def all(self) -> list[TemplateInfo]:
        """Every template's latest version (texts left out), by name."""
        names = sorted(cast("list[str]", self.redis.zrange(self.home.templates, 0, -1)))
        pipe = self.redis.pipeline(transaction=False)
        for name in names:
            pipe.hget(self.home.template(name), "v")
        versions = pipe.execute()
        for name, v in zip(names, versions, strict=True):
            pipe.hmget(self.home.template(name), [f"{v}f", f"{v}t"])
        details = pipe.execute()
        runs = self.runs(names)
        out = []
        for name, v, (source, put) in zip(names, versions, details, strict=True):
            if v is None:
                continue
            out.append(
                TemplateInfo(name, int(v), int(v), float(put or 0) / 1000.0, source or "",
                             runs[name])
            )  # fmt: skip
        return out

    def remove(self, name: str) -> None:
        """Delete every version of ``name`` (its runs stay as they are)."""
        self.latest(name)
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(self.home.template(name))
        pipe.zrem(self.home.templates, name)
        pipe.execute()
