"""Bad arguments get one line naming what is wrong and where, exit 2, and nothing written:
a task name the workflow has none of (CLI and HTTP), and durations or times out of range
(``--since 99999999d``, ``--since 0001-01-01T00:00``, ``--lease 1e308``...), never
argparse's "invalid <function> value" nor a traceback."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from typing import Any

import pytest
from engine_helpers import cli, one_line_error, snapshot
from test_http_server import Client, client  # noqa: F401 - the fixture

from engine import Engine, Workflow
from engine.cli import common, expire_cmds, http_cmds
from engine.core import timing
from engine.errors import DefinitionError, no_such_task
from engine.schedules.spec import parse_schedule

# argument parsing and exit codes: the same on a cluster
pytestmark = pytest.mark.same_on_cluster

# -- task names ---------------------------------------------------------------------------


def push_tasks(engine: Engine, n: int) -> str:
    wf = Workflow("named")
    for i in range(n):
        wf.task(f"t{i}")
    return engine.push(wf)


def test_a_missing_task_lists_a_few_of_the_workflows_tasks() -> None:
    assert str(no_such_task("7", "x", ["a", "b"])) == "workflow 7 has no task 'x' (its tasks: a, b)"
    many = str(no_such_task(7, "x", [f"t{i}" for i in range(1200)]))
    assert (
        many
        == "workflow 7 has no task 'x' (its tasks: t0, t1, t2, t3, t4, t5, t6, t7… (1,200 in all))"
    )


@pytest.mark.parametrize(
    "args",
    [
        ["status", "{wid}", "--task", "nosuch"],
        ["status", "{wid}", "--task", "nosuch", "--failed", "--page", "2"],
        ["logs", "{wid}", "--task", "nosuch"],
        ["logs", "{wid}", "--task", "nosuch", "--follow"],
        ["retry", "{wid}", "--task", "nosuch"],
        ["retry", "{wid}", "--task", "t1", "--task", "nosuch"],
        ["retry", "{wid}", "--task", "nosuch[3]"],
    ],
)
def test_a_task_name_the_workflow_has_none_of_is_one_line_exit_2(
    args: list[str], engine: Engine, cli_env: dict[str, str]
) -> None:
    wid = push_tasks(engine, 12)
    before = snapshot(engine.redis)
    result = cli(*[a.format(wid=wid) for a in args], env=cli_env)
    assert result.returncode == 2, result.stderr
    name = args[args.index("--task", 2) + 1] if args.count("--task") == 1 else "nosuch"
    assert one_line_error(result) == (
        f"redisflow: workflow {wid} has no task {name!r} "
        "(its tasks: t0, t1, t2, t3, t4, t5, t6, t7… (12 in all))"
    )
    assert result.stdout == ""
    assert snapshot(engine.redis) == before


def test_a_short_workflow_lists_all_its_tasks(engine: Engine, cli_env: dict[str, str]) -> None:
    wid = push_tasks(engine, 3)
    result = cli("status", wid, "--task", "t9", env=cli_env)
    assert result.returncode == 2
    assert one_line_error(result).endswith(
        f"workflow {wid} has no task 't9' (its tasks: t0, t1, t2)"
    )
    result = cli("status", wid, "--task", "t1", env=cli_env)  # one it has, not a map
    assert result.returncode == 2
    assert one_line_error(result).endswith(f"task 't1' of workflow {wid} is not a map")


def test_http_answers_a_missing_task_with_404_and_its_error(
    engine: Engine,
    client: Client,  # noqa: F811
) -> None:
    wid = push_tasks(engine, 3)
    http = client()
    before = snapshot(engine.redis)
    said = f"workflow {wid} has no task 'nosuch' (its tasks: t0, t1, t2)"
    r = http.get(f"/v1/workflows/{wid}/tasks/nosuch/logs")
    assert (r.status_code, r.json()["error"]) == (404, said)
    r = http.post(f"/v1/workflows/{wid}/retry", json={"tasks": ["nosuch"]})
    assert (r.status_code, r.json()["error"]) == (404, said)
    r = http.post("/v1/bulk", json={"action": "retry", "ids": [wid], "tasks": ["nosuch"]})
    assert r.status_code == 200, r.text
    assert said in r.text  # refused, with why
    assert snapshot(engine.redis) == before


# -- durations and times ------------------------------------------------------------------

BACK = r"is too far back \(at most [\d,]+d: no workflow is older than 1970-01-01\)"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["list", "--since", "99999999d"], "--since: '99999999d' " + BACK),
        (["list", "--since", "1e400"], "--since: '1e400' " + BACK),
        (["list", "--since", "1e308"], "--since: '1e308' " + BACK),
        (["list", "--until", "inf"], "--until: 'inf' " + BACK),
        (
            ["list", "--since", "0001-01-01T00:00"],
            r"--since: '0001-01-01T00:00' is too far back \(no workflow is older than 1970",
        ),
        (
            ["list", "--since", "1969-12-31T23:00Z"],
            r"--since: '1969-12-31T23:00Z' is too far back \(no workflow is older than 1970",
        ),
        (["list", "--since", "9999-12-31T23:59"], r"'9999-12-31T23:59' is in the future"),
        (["list", "--until", "2999-01-01T00:00Z"], r"'2999-01-01T00:00Z' is in the future"),
        (["list", "--since=-5m"], r"--since: '-5m' is negative: give how long ago"),
        (["list", "--since", "3x"], r"--since: not a duration or a time: '3x' \(e.g. 2h"),
        (["list", "--since", "1e400s"], r"--since: not a duration or a time: '1e400s'"),
        (["cancel", "--since", "99999999d", "--yes"], "--since: '99999999d' " + BACK),
        (["retry", "--until", "0001-01-01T00:00", "--yes"], r"'0001-01-01T00:00' is too far"),
        (["cleanup", "--finished", "--older-than", "1e308"], "--older-than: '1e308' " + BACK),
        (["cleanup", "--finished", "--older-than", "inf"], r"'inf' is too long \(not a finite"),
        (["expire", "1", "1e400"], r"'1e400' is too long: a retention is at most 3650d"),
        (["expire", "1", "99999999d"], r"'99999999d' is too long: a retention is at most"),
        (["push", "x.yaml", "--at", "0001-01-01T00:00"], r"--at: '0001-01-01T00:00' is out of"),
        (["run", "t", "--at", "soon"], r"--at: 'soon' is not a time \(like 2026"),
        (["push", "x.yaml", "--wait", "--timeout", "1e400"], r"--timeout: '1e400' is too long"),
        (["serve", "--port", "\u00b2"], r"--port: not a port \(1 to 65,535\)"),
        (["serve", "--workers", "9" * 5000], r"--workers: not a worker count \(1 to 64\)"),
        (["serve", "--max-connections", "9" * 5000], r"--max-connections: not a connection"),
        (["serve", "--max-wait", "1e400"], r"--max-wait '1e400' is too long"),
        (
            ["list", "--wait-replicas", "1", "--wait-timeout", "9" * 23],
            r"--wait-timeout: not a number of milliseconds from 0 to 86400000 \(a day\)",
        ),
        (["list", "--wait-timeout=-5"], r"--wait-timeout: not a number of milliseconds"),
        # counts: refused by their type, before anything connects
        (["--max-payload", "-5", "list"], r"--max-payload: not a size in bytes \(1 to 536,870,9"),
        (["--max-payload", "1e3", "list"], r"--max-payload: not a size in bytes"),
        (["--shards", "0", "list"], r"--shards: not a shard count \(1 to 1,024\): '0'"),
        (["--shards", "x", "list"], r"--shards: not a shard count"),
        (["acl", "--db", "x", "--role", "reader"], r"--db: not a database number"),
        (["server", "--port", "99999"], r"--port: not a port \(1 to 65,535\): '99999'"),
        (["server", "--cluster", "2", "--replicas", "-1"], r"--replicas: not a count of replicas"),
        (["cancel", "--state", "running", "--max", "1e9"], r"--max: not a count of workflows"),
    ],
)
def test_an_out_of_range_duration_or_time_is_one_line_exit_2(
    args: list[str], says: str, engine: Engine, cli_env: dict[str, str]
) -> None:
    engine.put_template(_template())
    before = snapshot(engine.redis)
    result = cli(*args, env=cli_env)
    assert result.returncode == 2, result.stderr
    err = one_line_error(result)
    assert re.search(says, err), err
    assert "invalid" not in err, err
    assert snapshot(engine.redis) == before


def _template() -> str:
    return "name: t\ntasks:\n  - name: a\n"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--lease", "1e308"], r"--lease: '1e308' is too long: at most 31622400 seconds \(366d\)"),
        (["--lease", "inf"], r"--lease: 'inf' is too long"),
        (["--connect-timeout", "1e400"], r"--connect-timeout: '1e400' is too long"),
        (["--exec-timeout", "nan"], r"--exec-timeout: must be above 0, not 'nan'"),
    ],
)
def test_the_agents_seconds_out_of_range_are_one_line_exit_2(
    args: list[str], says: str, cli_env: dict[str, str]
) -> None:
    result = cli("--exec", "true", "--until-idle", *args, tool="redisflow-agent", env=cli_env)
    assert result.returncode == 2, result.stderr
    err = result.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert re.search(says, err), err


def test_schedule_durations_past_a_century_are_refused(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    engine.put_template(_template())
    before = snapshot(engine.redis)
    for flag in ("--jitter", "--offset", "--catchup-window"):
        result = cli(
            "schedule", "put", "--name", "s", "--template", "t", "--every", "1h", flag, "1e308",
            env=cli_env,
        )  # fmt: skip
        assert result.returncode == 2, result.stderr
        key = flag[2:].replace("-", "_")
        assert one_line_error(result).endswith(f"{key}: '1e308' is too long (over a century)")
    assert snapshot(engine.redis) == before
    with pytest.raises(DefinitionError, match="every '1e400' is too long"):
        parse_schedule({"name": "s", "template": "t", "every": "1e400"}, "s")


def test_a_backfill_before_1970_is_refused(engine: Engine, cli_env: dict[str, str]) -> None:
    engine.put_template(_template())
    assert cli("schedule", "put", "--name", "s", "--template", "t", "--every", "1h",
               env=cli_env).returncode == 0  # fmt: skip
    before = snapshot(engine.redis)
    result = cli(
        "schedule", "backfill", "s", "--from", "0001-01-01T00:00+14:00", "--to", "0001-01-02",
        env=cli_env,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert one_line_error(result).endswith(
        "--from '0001-01-01T00:00+14:00' is before 1970-01-01: no schedule ticked then"
    )
    assert snapshot(engine.redis) == before


# -- the type functions themselves: only ArgumentTypeError, with words ---------------------

TYPES: list[Callable[[str], Any]] = [
    common.positive_int,
    common.whole_in(0, 100, "a count"),
    common.max_tasks,
    common.wait_ms,
    common.workflow_id,
    common.name_arg,
    common.positive_float,
    common.parse_duration,
    common.age,
    common._ago_arg,
    common.parse_time,
    expire_cmds._retention,
    common.port_number,
    http_cmds.worker_count,
    http_cmds.wait_limit,
    http_cmds.timeout,
    http_cmds.connection_cap,
]
ODD = ["1e400", "1e308", "-1", "nan", "inf", "-inf", "99999999d", "1e400s", "0001-01-01T00:00",
       "9999-12-31T23:59", "0001-01-01T00:00+14:00", "9999-12-31T23:59-14:00", "", " ", "\x00",
       "\u0663", "\u00b2", "1_000", "9" * 5000, "25:00", "-5m"]  # fmt: skip


@pytest.mark.parametrize("fn", TYPES, ids=lambda f: f.__name__)
def test_a_type_function_refuses_only_in_words(fn: Callable[[str], Any]) -> None:
    for text in ODD:
        try:
            value = fn(text)
        except argparse.ArgumentTypeError as e:
            assert str(e).strip() and "invalid" not in str(e), (text[:20], str(e))
        else:  # what is taken is a finite number (or a name, an id...)
            assert not isinstance(value, float) or math.isfinite(value), (fn.__name__, text[:20])


def test_ago_takes_what_it_should() -> None:
    assert common._ago_arg("2h") == 7200 and common._ago_arg("2h").text == "2h"
    assert common._ago_arg("0") == 0
    assert 0 <= common._ago_arg("00:00") <= 86400  # a time of day: the last one
    assert common._ago_arg("1970-01-02T00:00Z") > 0
    assert common.age("30d") == 30 * 86400


def test_timing_refuses_an_infinite_duration_and_an_unplaceable_time() -> None:
    with pytest.raises(timing.TooLong, match="'1e400' is too long"):
        timing.parse_duration("1e400")
    with pytest.raises(DefinitionError, match="out of range"):
        timing.parse_time("0001-01-01T00:00")
    assert timing.parse_time("0001-01-01T00:00+00:00").year == 1  # placed by its offset
