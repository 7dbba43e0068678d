"""``redisflow schedule ...`` and ``redisflow scheduler``: bad input is one line, exit 2,
nothing written; preview marks daylight saving; the commands on a real Redis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_helpers import cli, one_line_error, scan_keys

from engine.connect.urls import open_client

TEMPLATE = "name: job\ntasks:\n  - name: work\n"


@pytest.fixture()
def env(cli_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    t = tmp_path / "job.yaml"
    t.write_text(TEMPLATE)
    assert cli("template", "put", str(t), env=cli_env).returncode == 0
    return cli_env


def keys(url: str) -> list[str]:
    client = open_client(url, decode_responses=True)
    try:
        return sorted(k for k in scan_keys(client) if ":s:" in k or ":sdue" in k or ":snames" in k)
    finally:
        client.close()


@pytest.mark.same_on_cluster
@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--cron", "61 * * * *"], "cron: '61 * * * *' is not a cron expression (Bad minute)"),
        (["--cron", "0 2 * * *", "--timezone", "Europe/Atlantis"], "is not an IANA time zone"),
        (["--every", "1h", "--catchup", "most"], "invalid choice: 'most'"),
        (["--every", "1h", "--overlap", "sometimes"], "invalid choice: 'sometimes'"),
        (["--every", "soon"], "every 'soon' is not a duration"),
        (["--every", "1h", "--input", "[1]"], "input: [1] must be a mapping"),
        (["--cron", "@often"], "cron: '@often' is not a cron macro (known: @yearly, "),
        (["--cron", "0 2 * *"], "has 4 fields; a cron expression has 5"),
    ],
)
def test_bad_flags_are_one_line_exit_2_and_write_nothing(
    env: dict[str, str], redis_url: str, flags: list[str], words: str
) -> None:
    result = cli("schedule", "put", "--name", "s", "--template", "job", *flags, env=env)
    assert result.returncode == 2
    assert words in one_line_error(result)
    assert keys(redis_url) == []


def test_unknown_template_and_bad_file(env: dict[str, str], redis_url: str, tmp_path: Path) -> None:
    result = cli("schedule", "put", "--name", "s", "--template", "nope", "--every", "1h", env=env)
    assert result.returncode == 2 and "'nope'" in one_line_error(result)
    f = tmp_path / "s.yaml"
    f.write_text(
        "schedules:\n  - {name: a, template: job, every: 1h}\n"
        "  - {name: b, template: nope, every: 1h}\n"
    )
    result = cli("schedule", "put", str(f), env=env)  # one unknown template: none stored
    assert result.returncode == 2 and "'nope'" in one_line_error(result)
    f.write_text(
        "- {name: a, template: job, every: 1h}\n- {name: b, template: job, cron: '0 25 * * *'}\n"
    )
    result = cli("schedule", "put", str(f), env=env)
    assert result.returncode == 2
    assert one_line_error(result).startswith(f"redisflow: {f}:2: schedule 'b': cron:")
    result = cli("schedule", "put", str(f), "--every", "1h", env=env)
    assert result.returncode == 2 and "not both" in one_line_error(result)
    assert keys(redis_url) == []


def test_put_list_show_trigger_pause_rm(env: dict[str, str], tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(
        "schedules:\n"
        "  - name: nightly\n    template: job\n    cron: '30 2 * * *'\n"
        "    timezone: Europe/Paris\n    input: {region: eu}\n"
        "  - name: often\n    template: job\n    every: 15m\n    overlap: allow_all\n"
    )
    out = cli("schedule", "put", str(f), env=env)
    assert out.returncode == 0, out.stderr
    assert "schedule nightly: created, At 02:30 (Europe/Paris), next " in out.stdout
    listed = json.loads(cli("schedule", "list", "--json", env=env).stdout)["schedules"]
    assert [s["name"] for s in listed] == ["nightly", "often"]
    assert listed[0]["spec"]["input"] == {"region": "eu"}
    shown = cli("schedule", "show", "often", env=env).stdout
    assert "every 15m" in shown and "allow_all" in shown
    fired = cli("schedule", "trigger", "often", "--json", env=env)
    run = json.loads(fired.stdout)
    assert run["what"] == "fired" and run["run"]
    status = json.loads(cli("status", run["run"], "--json", env=env).stdout)
    assert status["input"]["schedule"] == "often"
    assert "paused" in cli("schedule", "pause", "often", env=env).stdout
    assert "paused" in cli("schedule", "list", env=env).stdout
    assert "unpaused from now" in cli("schedule", "unpause", "often", env=env).stdout
    assert cli("schedule", "rm", "often", env=env).returncode == 0
    missing = cli("schedule", "show", "often", env=env)
    assert missing.returncode == 2 and "does not exist" in one_line_error(missing)
    assert cli("status", run["run"], env=env).returncode == 0  # its run stays


def test_backfill_twice(env: dict[str, str]) -> None:
    assert cli("schedule", "put", "--name", "h", "--template", "job", "--every", "1h",
               env=env).returncode == 0  # fmt: skip
    args = ("schedule", "backfill", "h", "--from", "2026-01-01T00:00Z", "--to",
            "2026-01-01T03:00Z", "--json")  # fmt: skip
    first = json.loads(cli(*args, env=env).stdout)
    assert first["counts"] == {"fired": 1, "buffered": 3}
    again = json.loads(cli(*args, env=env).stdout)
    assert again["counts"] == {"dup": 4}


def test_preview_a_file_marks_daylight_saving(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("name: nightly\ntemplate: job\ncron: '30 2 * * *'\ntimezone: Europe/Paris\n")
    out = cli("schedule", "preview", str(f), "--next", "3", "--from", "2026-03-28T00:00")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "# nightly: At 02:30 (Europe/Paris)"
    assert lines[2] == (
        "2026-03-29 Sun 03:00:00 CEST  02:30 does not exist (clocks jump forward) → fires 03:00"
    )
    f.write_text("name: ny\ntemplate: job\ncron: '30 1 * * *'\ntimezone: America/New_York\n")
    rows = json.loads(
        cli("schedule", "preview", str(f), "--next", "2", "--json", "--from",
            "2026-10-31T12:00").stdout
    )  # fmt: skip
    assert [t["local"] for t in rows["ticks"]] == [
        "2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00",
    ]  # fmt: skip
    assert "happens twice (clocks go back) → fires once" in rows["ticks"][0]["note"]


def test_a_macro_and_show_prints_input_as_json(env: dict[str, str]) -> None:
    put = cli("schedule", "put", "--name", "d", "--template", "job", "--cron", "@daily",
              "--timezone", "Europe/Paris", "--input", '{"region": "eu", "dry": true, "n": null}',
              env=env)  # fmt: skip
    assert put.returncode == 0, put.stderr
    assert "schedule d: created, At 00:00 (Europe/Paris), next " in put.stdout
    shown = cli("schedule", "show", "d", env=env).stdout.splitlines()
    assert "when              cron @daily: At 00:00 (Europe/Paris)" in shown
    [line] = [x for x in shown if x.startswith("input ")]
    assert json.loads(line.removeprefix("input")) == {"region": "eu", "dry": True, "n": None}
    assert line.endswith('{"dry": true, "n": null, "region": "eu"}')  # stored with sorted keys


def test_preview_two_skipped_times_and_a_macro(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("name: twice\ntemplate: job\ncron: '15,45 2 * * *'\ntimezone: Europe/Paris\n")
    out = cli("schedule", "preview", str(f), "--next", "3", "--from", "2026-03-29T00:00")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1:] == [
        "2026-03-29 Sun 03:00:00 CEST  02:15 does not exist (clocks jump forward) → fires 03:00",
        "2026-03-29 Sun 03:00:00 CEST  02:45 does not exist (clocks jump forward) → fires 03:00",
        "2026-03-30 Mon 02:15:00 CEST",
    ]
    f.write_text("name: h\ntemplate: job\ncron: '@hourly'\n")
    out = cli("schedule", "preview", str(f), "--next", "2", "--from", "2026-03-29T00:10Z")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "# h: Every hour (UTC)", "2026-03-29 Sun 01:00:00 UTC", "2026-03-29 Sun 02:00:00 UTC",
    ]  # fmt: skip
