"""Server settings that put a deployment at risk, as warnings an operator must see.

Redis evicting keys under memory pressure silently loses workflows (a workflow hash, a
queue, a lease: the engine cannot tell it was ever there), so anything but
``maxmemory-policy noeviction`` is reported loudly, as BullMQ does. Read through
``INFO memory``, not ``CONFIG GET`` (admin only). The roles of ``redisflow acl`` have no
INFO (it is in ``@dangerous``, and ``+info|memory`` would still allow ``INFO memory
everything``): for them the check is skipped, logged at INFO level; grant ``+info`` to a
user to have it warn, or check the policy as an admin.
"""

from __future__ import annotations

import logging
from typing import Any

import redis

log = logging.getLogger(__name__)

NEAR_FULL = 0.9  # warn when used memory passes this share of maxmemory


def server_warnings(client: redis.Redis) -> list[str]:
    """What is wrong with the server's settings for redisflow, one line each ([] if all
    is well, or when this user may not run INFO)."""
    try:
        info: dict[str, Any] = client.info("memory")
    except redis.ResponseError as e:
        log.info("cannot check maxmemory-policy (%s): INFO is not granted to this user", e)
        return []
    out: list[str] = []
    policy = str(info.get("maxmemory_policy", "noeviction"))
    limit = int(info.get("maxmemory", 0) or 0)
    used = int(info.get("used_memory", 0) or 0)
    if policy != "noeviction":
        out.append(
            f"Redis maxmemory-policy is {policy}, not noeviction: when memory runs out Redis "
            "deletes keys and workflows are lost; set maxmemory-policy noeviction"
        )
    if limit and used >= NEAR_FULL * limit:
        out.append(
            f"Redis memory is {used * 100 // limit}% of maxmemory ({used >> 20} of "
            f"{limit >> 20} MB): pushes will soon be refused; clean up finished workflows "
            "or raise maxmemory"
        )
    return out
