"""Steering many workflows at once (engine/ops/bulk.py): by ids or by the filter of
``redisflow list``, in the engine, the CLI (a count to confirm; --yes without a
terminal) and HTTP (POST /v1/bulk, a dry run's count as ``expect``). Every workflow is
named as acted on or refused, with the reason its script gave."""

from __future__ import annotations

import io
import json

import httpx
import pytest
from engine_helpers import cli, run_agent
from test_http_server import Client, client  # noqa: F401 - the fixture

from engine import Engine, Task, Workflow
from engine.cli import main as cli_main
from engine.core.model import WorkflowState
from engine.errors import DefinitionError
from engine.ops import bulk

NIGHTLY = "name: nightly\ntasks:\n  - name: load\n    type: load\n"


class Terminal(io.StringIO):
    """Stdin as a terminal, with the operator's answer."""

    def isatty(self) -> bool:
        return True


def failing(_: Task) -> None:
    raise RuntimeError("the source was down")


def seeded(engine: Engine) -> dict[str, list[str]]:
    """Three failed runs of template nightly, one succeeded run of it, two running
    workflows of another name (nothing serves their type)."""
    engine.put_template(NIGHTLY)
    failed = [engine.run("nightly").id for _ in range(3)]
    run_agent(engine, {"load": failing})
    ok = engine.run("nightly").id
    run_agent(engine, {"load": lambda t: 1})
    other = Workflow("other")
    other.task("wait", type="nobody")
    running = [engine.push(other) for _ in range(2)]
    return {"failed": failed, "ok": [ok], "running": running}


def test_select_and_apply_report_every_workflow(engine: Engine) -> None:
    runs = seeded(engine)
    chosen = bulk.select(engine, bulk.Filter(template="nightly", state="failed"))
    assert sorted(chosen.ids) == sorted(runs["failed"]) and chosen.matched == 3
    whole = bulk.select(engine, bulk.Filter(template="nightly"))
    assert whole.matched == 4
    report = bulk.apply(engine, "retry", whole.ids)
    assert sorted(report.acted) == sorted(runs["failed"])
    assert all(n == 1 for n in report.acted.values())  # one failed task reset each
    assert report.refused == {
        runs["ok"][0]: f"workflow {runs['ok'][0]} is succeeded; only a failed workflow "
        "can be retried"
    }
    assert all(engine.state(w) == WorkflowState.RUNNING for w in runs["failed"])
    again = bulk.apply(engine, "cancel", [*runs["running"], "999999"])
    assert sorted(again.acted) == sorted(runs["running"])
    assert list(again.refused) == ["999999"] and "does not exist" in again.refused["999999"]


def test_select_stops_at_its_limit_and_says_how_many_more(engine: Engine) -> None:
    runs = seeded(engine)
    chosen = bulk.select(engine, bulk.Filter(name="other"), limit=1)
    assert chosen.ids == [runs["running"][-1]]  # newest first
    assert (chosen.matched, chosen.more) == (2, 1)
    with pytest.raises(DefinitionError, match="a bulk limit is 1 to 10000"):
        bulk.select(engine, bulk.Filter(), limit=0)
    with pytest.raises(DefinitionError, match="no bulk action 'explode'"):
        bulk.apply(engine, "explode", runs["running"])
    with pytest.raises(DefinitionError, match="state 'lost' is not one of"):
        bulk.Filter(state="lost")


# -- the CLI ------------------------------------------------------------------------------


def test_several_ids_in_one_command(engine: Engine, cli_env: dict[str, str]) -> None:
    runs = seeded(engine)
    a, b = runs["running"]
    result = cli("pause", a, b, runs["ok"][0], env=cli_env)
    assert result.returncode == 1  # one refused
    assert f"workflow {a}: paused (1 ready tasks held)" in result.stdout
    assert f"workflow {b}: paused" in result.stdout
    assert "pause: 2 acted on, 1 refused (of 3 selected)" in result.stdout
    assert (
        f"refused: workflow {runs['ok'][0]} is succeeded; only a running workflow can be paused"
        in result.stderr
    )
    result = cli("release", a, b, "--json", env=cli_env)
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["acted"] == [{"id": a, "count": 1}, {"id": b, "count": 1}]
    assert body["refused"] == [] and body["selected"] == 2
    one = cli("cancel", a, env=cli_env)  # one id alone: as before
    assert (one.returncode, one.stdout) == (0, f"workflow {a}: cancel done (1 task)\n")


def test_a_filter_needs_yes_without_a_terminal(engine: Engine, cli_env: dict[str, str]) -> None:
    runs = seeded(engine)
    refused = cli(
        "retry", "--template", "nightly", "--state", "failed", "--since", "1h", env=cli_env
    )
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "redisflow: retry: 3 workflows match (template nightly, state failed, created since "
        "1h); stdin is not a terminal, so confirm with --yes"
    ]
    assert all(engine.state(w) == WorkflowState.FAILED for w in runs["failed"])
    done = cli(
        "retry", "--template", "nightly", "--state", "failed", "--since", "1h", "--yes",
        "--json", env=cli_env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert sorted(r["id"] for r in body["acted"]) == sorted(runs["failed"])
    assert body["filter"] == {"state": "failed", "template": "nightly", "since": "1h"}
    assert all(engine.state(w) == WorkflowState.RUNNING for w in runs["failed"])
    none = cli("cancel", "--template", "nightly", "--until", "1h", "--yes", env=cli_env)
    assert (none.returncode, none.stdout) == (0, "no workflow matches: nothing to cancel\n")


def test_a_filter_naming_nothing_known_is_refused(engine: Engine, cli_env: dict[str, str]) -> None:
    """A template or name nothing has (a typo) matches nothing known: exit 2 and HTTP 404,
    in one line; a known one that matches nothing now still says so, exit 0 / 200. A
    template with no run yet, and one removed whose runs are kept, are known."""
    runs = seeded(engine)
    for args, says in (
        (["--template", "nigthly"], "template 'nigthly' matches nothing known"),
        (["--name", "ohter", "--state", "failed"], "name 'ohter' matches nothing known"),
        (["--template", "nightly", "--name", "ohter"], "name 'ohter' matches nothing known"),
    ):
        r = cli("retry", *args, "--yes", env=cli_env)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stdout == ""
        assert r.stderr.strip().splitlines() == [f"redisflow: {says}: " + (
            "no template has that name and no run of one is kept" if "template" in says
            else "no workflow of that name is kept"
        )]  # fmt: skip
    none = cli("retry", "--name", "other", "--state", "failed", "--yes", env=cli_env)
    assert (none.returncode, none.stdout) == (0, "no workflow matches: nothing to retry\n")
    engine.put_template(NIGHTLY.replace("nightly", "fresh"))  # known, no run yet
    none = cli("cancel", "--template", "fresh", "--yes", env=cli_env)
    assert (none.returncode, none.stdout) == (0, "no workflow matches: nothing to cancel\n")
    engine.remove_template("nightly")  # gone, its runs kept: still known
    none = cli("cancel", "--template", "nightly", "--state", "paused", "--yes", env=cli_env)
    assert (none.returncode, none.stdout) == (0, "no workflow matches: nothing to cancel\n")
    assert all(engine.state(w) == WorkflowState.FAILED for w in runs["failed"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["cancel"], "cancel needs workflow ids or a filter (--state, --name, --template"),
        (["cancel", "1", "--state", "running"], "cancel: give workflow ids or a filter, not both"),
        (["cleanup", "--finished", "--state", "failed"], "cleanup --finished takes no workflow"),
        (["pause", "--name", "x", "--max", "0", "--yes"], "--max: not a count of workflows"),
        (["retry", "--since", "1h", "--until", "2h"], "--until 2h is not later than --since 1h"),
    ],
)
def test_bad_bulk_input_is_one_line(
    engine: Engine, cli_env: dict[str, str], args: list[str], message: str
) -> None:
    result = cli(*args, env=cli_env)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr


def test_a_filter_asks_on_a_terminal_saying_how_many(
    engine: Engine,
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    runs = seeded(engine)
    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    assert cli_main.run(["cancel", "--name", "other", "--url", redis_url]) == 1
    err = capsys.readouterr().err
    assert "cancel 2 workflows (name other)? [y/N]" in err and "nothing done" in err
    assert all(engine.state(w) == WorkflowState.RUNNING for w in runs["running"])
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    assert cli_main.run(["cleanup", "--template", "nightly", "--url", redis_url]) == 0
    captured = capsys.readouterr()
    assert "cleanup 4 workflows (template nightly)? [y/N]" in captured.err
    assert "cleanup: 4 acted on, 0 refused" in captured.out  # all four had finished
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    assert cli_main.run(["cancel", "--name", "other", "--max", "1", "--url", redis_url]) == 0
    captured = capsys.readouterr()
    assert "cancel the newest 1 of 2 (name other)? [y/N]" in captured.err
    assert "1 more match beyond --max 1: run it again" in captured.err


# -- HTTP -----------------------------------------------------------------------------------


@pytest.fixture()
def api(client: Client) -> httpx.Client:  # noqa: F811
    return client()


def test_http_bulk_by_filter_confirms_with_a_count(engine: Engine, api: httpx.Client) -> None:
    runs = seeded(engine)
    flt = {"template": "nightly", "state": "failed"}
    dry = api.post("/v1/bulk", json={"action": "retry", "filter": flt, "dry_run": True})
    assert dry.status_code == 200, dry.text
    assert sorted(dry.json()["ids"]) == sorted(runs["failed"]) and dry.json()["matched"] == 3
    assert all(engine.state(w) == WorkflowState.FAILED for w in runs["failed"])
    no_count = api.post("/v1/bulk", json={"action": "retry", "filter": flt})
    assert no_count.status_code == 400 and "a filter needs expect" in no_count.json()["error"]
    wrong = api.post("/v1/bulk", json={"action": "retry", "filter": flt, "expect": 2})
    assert wrong.status_code == 409
    assert wrong.json()["error"] == "3 workflows are selected now, not the 2 expected: nothing done"
    assert all(engine.state(w) == WorkflowState.FAILED for w in runs["failed"])
    done = api.post("/v1/bulk", json={"action": "retry", "filter": flt, "expect": 3})
    assert done.status_code == 200, done.text
    assert sorted(r["id"] for r in done.json()["acted"]) == sorted(runs["failed"])
    assert all(engine.state(w) == WorkflowState.RUNNING for w in runs["failed"])


def test_http_bulk_by_ids_names_the_refused(engine: Engine, api: httpx.Client) -> None:
    runs = seeded(engine)
    ids = [*runs["running"], runs["ok"][0]]
    r = api.post("/v1/bulk", json={"action": "cancel", "ids": ids})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [a["id"] for a in body["acted"]] == runs["running"]
    assert body["refused"] == [
        {
            "id": runs["ok"][0],
            "reason": f"workflow {runs['ok'][0]} is succeeded; only a running, paused, "
            "scheduled or queued workflow can be cancelled",
        }
    ]


def test_http_bulk_filter_naming_nothing_known_is_404(engine: Engine, api: httpx.Client) -> None:
    seeded(engine)
    for flt, says in (
        ({"template": "nigthly"}, "template 'nigthly' matches nothing known"),
        ({"name": "ohter", "state": "failed"}, "name 'ohter' matches nothing known"),
    ):
        for extra in ({"dry_run": True}, {"expect": 0}):
            r = api.post("/v1/bulk", json={"action": "retry", "filter": flt, **extra})
            assert r.status_code == 404, r.text
            assert r.json()["error"].startswith(says)
    known = api.post(
        "/v1/bulk", json={"action": "retry", "filter": {"name": "other", "state": "failed"},
                          "expect": 0},
    )  # fmt: skip
    assert known.status_code == 200 and known.json()["selected"] == 0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"action": "explode", "ids": ["1"]}, "action is one of retry, cancel"),
        ({"action": "cancel"}, "give ids or a filter, one of them"),
        ({"action": "cancel", "ids": ["1"], "filter": {}}, "give ids or a filter"),
        ({"action": "cancel", "ids": ["x1"]}, "ids: 'x1' is not a workflow id"),
        ({"action": "cancel", "ids": ["1"], "tasks": ["a"]}, "tasks goes with the retry"),
        ({"action": "cancel", "filter": {"state": "lost"}, "dry_run": True}, "filter.state"),
        ({"action": "cancel", "filter": {"when": "x"}}, "filter has no field 'when'"),
        ({"action": "cancel", "ids": [], "limit": True}, "limit is a whole number"),
        ({"action": "cancel", "ids": [], "extra": 1}, "the body has no field 'extra'"),
        (
            {"action": "cancel", "filter": {"created_after": "yesterday"}, "dry_run": True},
            "filter.created_after 'yesterday' is not an RFC 3339 time",
        ),
    ],
)
def test_http_bulk_bad_bodies_are_400(
    engine: Engine, api: httpx.Client, body: dict[str, object], message: str
) -> None:
    seeded(engine)
    before = engine.stats().workflows
    r = api.post("/v1/bulk", json=body)
    assert r.status_code == 400 and message in r.json()["error"], r.text
    assert engine.stats().workflows == before
