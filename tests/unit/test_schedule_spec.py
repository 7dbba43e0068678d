"""Schedule settings: parsing from files and mappings, validation (pure, no Redis)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import DefinitionError
from engine.schedules import ScheduleSpec, load_schedules, parse_schedule
from engine.schedules.spec import format_ms, load_text

BASE = {"name": "nightly", "template": "report", "cron": "0 2 * * *"}


def test_defaults_and_round_trip() -> None:
    spec = parse_schedule(BASE)
    assert (spec.overlap, spec.catchup, spec.timezone) == ("skip", "latest", "UTC")
    assert (spec.catchup_window_ms, spec.max_catchup, spec.jitter_ms) == (3_600_000, 100, 0)
    assert spec.paused is None and not spec.pause_on_failure
    assert ScheduleSpec.from_json(spec.to_json()) == spec
    assert spec.when == "cron 0 2 * * *"


def test_every_offset_and_durations() -> None:
    spec = parse_schedule(
        {"name": "n", "template": "t", "every": "15m", "offset": 300, "jitter": "1.5s",
         "catchup_window": "2h", "max_catchup": 7}
    )  # fmt: skip
    assert (spec.every_ms, spec.offset_ms, spec.jitter_ms) == (900_000, 300_000, 1500)
    assert (spec.catchup_window_ms, spec.max_catchup) == (7_200_000, 7)
    assert spec.when == "every 15m offset 5m"


def test_times_read_in_the_schedule_zone() -> None:
    spec = parse_schedule(
        {**BASE, "timezone": "Europe/Paris", "start_at": "2026-01-01T00:00",
         "end_at": "2026-06-01T00:00:00Z"}
    )  # fmt: skip
    assert spec.start_at_ms == 1767222000000  # midnight in Paris is 23:00 UTC
    assert spec.end_at_ms == 1780272000000


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"cron": "61 * * * *"}, "cron: '61 * * * *' is not a cron expression"),
        ({"cron": "0 2 * *"}, "has 4 fields"),
        ({"cron": "0 0 0 2 * *"}, "has 6 fields"),
        ({"cron": "0 0 30 2 *"}, "is not a cron expression"),
        ({"timezone": "Europe/Atlantis"}, "timezone: 'Europe/Atlantis' is not an IANA"),
        ({"overlap": "sometimes"}, "overlap: 'sometimes' is not one of skip, buffer_one"),
        ({"catchup": "most"}, "catchup: 'most' is not one of none, latest, all, coalesce"),
        ({"every": "1m"}, "give either cron: (5 fields) or every:"),
        ({"cron": None}, "give either cron"),
        ({"template": None}, "template: missing"),
        ({"max_catchup": 0}, "max_catchup: 0 must be a whole number from 1 to 1000"),
        ({"jitter": "soon"}, "jitter 'soon' is not a duration"),
        ({"input": [1, 2]}, "input: [1, 2] must be a mapping"),
        ({"input": {"tick": 1}}, "input: tick is set by the scheduler"),
        ({"start_at": "tomorrow"}, "start_at: 'tomorrow' is not a time"),
        ({"start_at": "2026-02-01", "end_at": "2026-01-01"}, "end_at: must be after start_at"),
        ({"pause_on_failure": "yes"}, "pause_on_failure: 'yes' must be true or false"),
        ({"colour": "red"}, "unknown field 'colour'"),
        ({"offset": "5m"}, "offset: only with every:"),
    ],
)
def test_bad_settings_are_one_line_naming_the_field(change: dict, words: str) -> None:
    data = {**BASE, **change}
    data = {k: v for k, v in data.items() if v is not None}
    with pytest.raises(DefinitionError) as e:
        parse_schedule(data, "s.yaml:3")
    message = str(e.value)
    assert words in message
    assert message.startswith("s.yaml:3: schedule 'nightly': ")
    assert "\n" not in message


def test_every_bounds() -> None:
    with pytest.raises(DefinitionError, match="every: '500ms' must be between 1s and 366d"):
        parse_schedule({"name": "n", "template": "t", "every": "500ms"})
    with pytest.raises(DefinitionError, match="offset: '1h' must be shorter than every"):
        parse_schedule({"name": "n", "template": "t", "every": "1h", "offset": "1h"})


def test_file_forms_and_lines(tmp_path: Path) -> None:
    one = tmp_path / "one.yaml"
    one.write_text("name: a\ntemplate: t\nevery: 1h\n")
    assert [s.name for s in load_schedules(one)] == ["a"]
    many = tmp_path / "many.yaml"
    many.write_text(
        "schedules:\n"
        "  - name: a\n    template: t\n    every: 1h\n"
        "  - name: b\n    template: t\n    cron: '0 2 * * *'\n    timezone: Mars/Olympus\n"
    )
    with pytest.raises(DefinitionError) as e:
        load_schedules(many)
    assert str(e.value).startswith(f"{many}:5: schedule 'b': timezone: 'Mars/Olympus'")
    js = tmp_path / "s.json"
    js.write_text('[{"name": "a", "template": "t", "every": 60}]')
    assert load_schedules(js)[0].every_ms == 60_000


def test_file_problems(tmp_path: Path) -> None:
    with pytest.raises(DefinitionError, match="no such file"):
        load_schedules(tmp_path / "missing.yaml")
    with pytest.raises(DefinitionError, match="the file is empty"):
        load_text("", "e.yaml")
    with pytest.raises(DefinitionError, match=r"x.yaml:1: invalid YAML"):
        load_text("cron: * * * * *\n", "x.yaml")  # unquoted: a YAML alias
    with pytest.raises(DefinitionError, match="is in the file twice"):
        load_text("- {name: a, template: t, every: 1h}\n- {name: a, template: t, every: 2h}\n")
    with pytest.raises(DefinitionError, match=r"x.json:1: invalid JSON"):
        load_text("{nope", "x.json")


def test_yaml_timestamps_and_nested_input() -> None:
    [spec] = load_text(
        "name: a\ntemplate: t\nevery: 1h\nstart_at: 2026-01-01T06:00:00Z\n"
        "input:\n  region: eu\n  opts: {deep: [1, 2]}\n"
    )
    assert spec.start_at_ms == 1767247200000
    assert spec.input == {"region": "eu", "opts": {"deep": [1, 2]}}


def test_format_ms() -> None:
    assert [format_ms(x) for x in (0, 250, 1500, 90_000, 5_400_000, 86_400_000)] == [
        "0s", "250ms", "1.5s", "1m30s", "1h30m", "1d",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "macro", ["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"]
)
def test_cron_macros_are_accepted(macro: str) -> None:
    spec = parse_schedule({**BASE, "cron": f" {macro.upper()} "})
    assert spec.cron == macro and spec.when == f"cron {macro}"
    assert ScheduleSpec.from_json(spec.to_json()) == spec


def test_an_unknown_macro_is_one_line() -> None:
    with pytest.raises(DefinitionError, match=r"cron: '@reboot' is not a cron macro \(known: "):
        parse_schedule({**BASE, "cron": "@reboot"})


@pytest.mark.parametrize(
    ("expr", "words"),
    [
        ("0 0 */2 * 1", "At 00:00, on days 1, 3, 5, … 31 of the month, if that day is also Monday"),
        ("0 0 1,15 * 1-5", "At 00:00, on day 1 and 15 of the month, or on Monday through Friday"),
        ("0 0 1 * 1", "At 00:00, on day 1 of the month, or on Monday"),
        ("0 0 * * 1", "At 00:00, only on Monday"),
        ("@daily", "At 00:00"),
        ("@weekly", "At 00:00, only on Sunday"),
    ],
)
def test_descriptions_join_the_day_fields_as_cron_does(expr: str, words: str) -> None:
    from engine.schedules import describe

    assert describe(parse_schedule({**BASE, "cron": expr})) == f"{words} (UTC)"
