"""Input schemas against hostile schemas and inputs, on a real Redis: a ``$ref`` never
reads a file or fetches a URL, no message shows the schema's text, and a ``pattern`` is
matched in linear time (RE2), so a catastrophic regex cannot hold a push or the HTTP
server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from engine_helpers import cli, one_line_error, snapshot
from jsonschema import Draft4Validator, Draft6Validator, Draft7Validator, Draft201909Validator
from test_http_server import Client, client  # noqa: F401 - the fixture

from engine import DefinitionError, Engine, Workflow
from engine.http.triggers import new_trigger
from engine.spec.schema_regex import linear
from engine.spec.schemas import check_input, compile_schema
from engine.store.codec import compile_workflow

SECRET = "hunter2-db-password"


class _Hits:
    """A local HTTP server that serves a JSON Schema and counts the requests it gets."""

    def __init__(self) -> None:
        hits = self
        self.count = 0

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the library's name
                hits.count += 1
                body = json.dumps({"enum": [SECRET]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/schema.json"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()


@pytest.fixture()
def hits() -> Iterator[_Hits]:
    h = _Hits()
    yield h
    h.server.shutdown()
    h.server.server_close()


@pytest.fixture()
def secret_file(tmp_path: Path) -> str:
    """A file:// URL of a JSON file holding a secret (a schema that lists it)."""
    path = tmp_path / "secret.json"
    path.write_text(json.dumps({"enum": [SECRET]}))
    return path.as_uri()


def template(schema: Any, name: str = "t") -> str:
    return json.dumps({"name": name, "input_schema": schema, "tasks": [{"name": "a"}]})


def refused(engine: Engine, schema: Any) -> str:
    """The one-line message of a template put refused for ``schema``; nothing written."""
    before = snapshot(engine.redis)
    with pytest.raises(DefinitionError) as e:
        engine.put_template(template(schema))
    assert snapshot(engine.redis) == before
    message = str(e.value)
    assert "\n" not in message and SECRET not in message
    return message


# -- $ref ------------------------------------------------------------------------------


def test_a_ref_outside_the_schema_is_refused_when_stored(
    engine: Engine, hits: _Hits, secret_file: str
) -> None:
    for schema, where in (
        ({"$ref": secret_file}, "at $['$ref']: a $ref must refer within the schema"),
        ({"$ref": hits.url}, "at $['$ref']"),
        ({"properties": {"a": {"$ref": hits.url}}}, "at $.properties.a['$ref']"),
        ({"properties": {"enum": {"$ref": hits.url}}}, "at $.properties.enum['$ref']"),
        ({"$defs": {"d": {"$dynamicRef": hits.url}}}, "at $['$defs'].d['$dynamicRef']"),
        (
            {"prefixItems": [{"$ref": "schema.json"}]},
            "at $.prefixItems[0]['$ref']",
        ),  # relative: a file
        ({"x-docs": {"$ref": hits.url}}, "at $['x-docs']['$ref']"),  # an unknown keyword
        (
            {"$schema": "http://json-schema.org/draft-07/schema#", "$ref": secret_file},
            "at $['$ref']",
        ),
    ):
        message = refused(engine, schema)
        assert where in message, message
        assert "file://" not in message and "127.0.0.1" not in message
    # Python's builder and a workflow pushed straight away: the same
    wf = Workflow("w", input_schema={"$ref": hits.url})
    wf.task("a")
    with pytest.raises(DefinitionError, match=r"at \$\['\$ref'\]"):
        engine.push(wf, {})
    assert hits.count == 0 and engine.count() == 0


def test_references_within_the_schema_still_work(engine: Engine) -> None:
    schema = {
        "$defs": {"id": {"type": "integer"}},
        "properties": {"id": {"$ref": "#/$defs/id"}, "any": {"$ref": "#"}},
        "default": {"$ref": "http://127.0.0.1:1/x"},  # data, not a reference
        "examples": [{"$ref": "file:///etc/passwd"}],
    }
    engine.put_template(template(schema))
    assert engine.run("t", {"id": 2}).id
    with pytest.raises(DefinitionError, match=r"at \$\.id: fails 'type'"):
        engine.run("t", {"id": "2"})


def test_the_validator_never_retrieves(engine: Engine, hits: _Hits) -> None:
    """A reference into data (which the check at store time does not read as a schema)
    that leads outside resolves nowhere: the registry retrieves nothing."""
    schema = {"$ref": "#/default", "default": {"$ref": hits.url}}
    message = refused(engine, schema)
    assert "input_schema cannot be applied: Unresolvable (a $ref that resolves nowhere)" in message
    assert hits.count == 0


def test_a_ref_outside_is_refused_by_the_cli_and_over_http(
    engine: Engine,
    cli_env: dict[str, str],
    tmp_path: Path,
    client: Client,  # noqa: F811
    hits: _Hits,
    secret_file: str,
) -> None:
    path = tmp_path / "t.json"
    before = snapshot(engine.redis)
    for ref in (secret_file, hits.url):
        path.write_text(template({"$ref": ref}))
        for args in (("template", "put", str(path)), ("push", str(path), "--input", "{}")):
            r = cli(*args, env=cli_env)
            assert r.returncode == 2, r.stderr
            err = one_line_error(r)
            assert "input_schema at $['$ref']: a $ref must refer within the schema" in err
            assert SECRET not in err and ref not in err
    assert snapshot(engine.redis) == before
    api: httpx.Client = client()
    for ref in (secret_file, hits.url):
        r = api.put("/v1/templates/x", json=json.loads(template({"$ref": ref}, "x")))
        assert r.status_code == 400, r.text
        assert "at $['$ref']" in r.json()["error"]
        assert SECRET not in r.text and ref not in r.text
    assert hits.count == 0 and engine.templates() == []


# -- messages --------------------------------------------------------------------------


def test_messages_name_paths_and_rules_not_the_schema(engine: Engine) -> None:
    schema = {
        "type": "object",
        "required": [SECRET],
        "properties": {
            "a": {"enum": [SECRET]},
            "b": {"const": SECRET},
            "c": {"pattern": f"^{SECRET}$"},
            "d": {"type": "object", "additionalProperties": False},
            "e": False,
        },
    }
    engine.put_template(template(schema))
    head = "input does not fit the input_schema of workflow 't': "
    for value, tail in (
        ({}, "at $: fails 'required' (input_schema at $.required)"),
        ({SECRET: 1, "a": "x"}, "at $.a: fails 'enum' (input_schema at $.properties.a.enum)"),
        ({SECRET: 1, "b": "x"}, "at $.b: fails 'const' (input_schema at $.properties.b.const)"),
        ({SECRET: 1, "c": "x"}, "at $.c: fails 'pattern'"),
        ({SECRET: 1, "d": {"z": 1}}, "at $.d: fails 'additionalProperties'"),
        ({SECRET: 1, "e": 1}, "at $: is not allowed (a false schema)"),  # the library's path
    ):
        with pytest.raises(DefinitionError) as e:
            engine.run("t", value)
        assert str(e.value).startswith(head + tail), str(e.value)
        assert SECRET not in str(e.value)
    # a schema that is not valid: where and which rule of the meta-schema, not its text
    message = refused(engine, {"properties": {"a": {"type": SECRET}}})
    assert "input_schema is not a valid JSON Schema: at $.properties.a.type: fails" in message


# -- regexes ---------------------------------------------------------------------------

CATASTROPHIC = "^(a+)+$"
DRAFT_2019 = "https://json-schema.org/draft/2019-09/schema"
LONG = "a" * 10_000 + "!"  # Python's re would backtrack through 2**10000 ways


@pytest.mark.timeout(60)
def test_every_draft_matches_its_regex_keywords_on_re2() -> None:
    for cls in (Draft4Validator, Draft6Validator, Draft7Validator, Draft201909Validator):
        on_re2 = linear(cls)
        assert on_re2.VALIDATORS["pattern"] is not cls.VALIDATORS["pattern"]
        assert on_re2.VALIDATORS["type"] is cls.VALIDATORS["type"]
    draft4 = "http://json-schema.org/draft-04/schema#"
    wf = Workflow(
        "w", input_schema={"$schema": draft4, "properties": {"s": {"pattern": CATASTROPHIC}}}
    )
    wf.task("a")
    with pytest.raises(DefinitionError, match=r"at \$\.s: fails 'pattern'"):
        check_input(compile_workflow(wf).input_schema, {"s": LONG}, "w")


@pytest.mark.timeout(60)
def test_a_catastrophic_pattern_is_matched_promptly(engine: Engine) -> None:
    cases = {  # the keyword, and the rule that fails
        "pattern": ({"pattern": CATASTROPHIC}, LONG, "pattern"),
        "propertyNames": ({"propertyNames": {"pattern": CATASTROPHIC}}, {LONG: 1}, "pattern"),
        "additionalProperties": (
            {"patternProperties": {CATASTROPHIC: {}}, "additionalProperties": False},
            {LONG: 1},
            "additionalProperties",
        ),
        "unevaluatedProperties": (
            {"patternProperties": {CATASTROPHIC: {}}, "unevaluatedProperties": False},
            {LONG: 1},
            "unevaluatedProperties",
        ),
        "patternProperties": (
            {"patternProperties": {CATASTROPHIC: {"type": "integer"}}},
            {"a" * 10_000: "x"},  # matches: its value is checked
            "type",
        ),
    }
    # Draft 2020-12, and Draft 2019-09 (its own unevaluatedProperties)
    for draft in ("https://json-schema.org/draft/2020-12/schema", DRAFT_2019):
        for keyword, (schema, bad, rule) in cases.items():
            wf = Workflow("w", input_schema={"$schema": draft, "properties": {"s": schema}})
            wf.task("a")
            with pytest.raises(DefinitionError, match=rf": fails '{rule}' \(input_schema at"):
                engine.push(wf, {"s": bad})
            good = "aaaa" if keyword == "pattern" else {"aaaa": 1}
            assert engine.push(wf, {"s": good}), keyword
    assert engine.count() == 10


def test_a_pattern_re2_cannot_match_is_refused_when_stored(
    engine: Engine,
    cli_env: dict[str, str],
    tmp_path: Path,
    client: Client,  # noqa: F811
) -> None:
    for schema, where in (
        ({"properties": {"a": {"pattern": r"(a)\1"}}}, "at $.properties.a.pattern"),
        ({"patternProperties": {"^(?=x)": {}}}, "at $.patternProperties['^(?=x)']"),
        ({"items": {"propertyNames": {"pattern": "(?<!a)b"}}}, "at $.items.propertyNames"),
    ):
        message = refused(engine, schema)
        assert f"{where}" in message and "a pattern RE2 cannot compile" in message, message
        assert "no backreferences or lookaround" in message
    path = tmp_path / "t.json"
    path.write_text(template({"pattern": r"(a)\1"}))
    r = cli("template", "put", str(path), env=cli_env)
    assert r.returncode == 2 and "at $.pattern: a pattern RE2 cannot compile" in one_line_error(r)
    api: httpx.Client = client()
    r = api.put("/v1/templates/x", json=json.loads(template({"pattern": "(?=a)"}, "x")))
    assert r.status_code == 400 and "at $.pattern" in r.json()["error"]
    assert engine.templates() == []


@pytest.mark.timeout(120)
def test_healthz_answers_while_a_catastrophic_input_is_checked(
    engine: Engine,
    client: Client,  # noqa: F811
) -> None:
    """An unauthenticated trigger delivers the input a catastrophic pattern would choke
    on; the server keeps answering and refuses the delivery."""
    api: httpx.Client = client()
    r = api.put("/v1/templates/t", json=json.loads(template({"pattern": CATASTROPHIC})))
    assert r.status_code == 201, r.text
    engine.put_trigger(new_trigger("open", "t", "none"))
    with ThreadPoolExecutor(2) as pool:
        deliveries = [pool.submit(api.post, "/v1/triggers/open", json=LONG) for _ in range(2)]
        assert api.get("/healthz").status_code == 200
        for delivery in deliveries:
            r = delivery.result(timeout=60)
            assert r.status_code == 400 and "at $: fails 'pattern'" in r.json()["error"]
    assert api.post("/v1/triggers/open", json="aaaa").status_code == 202
    assert engine.count() == 1


def test_a_path_from_the_input_is_shown_with_its_control_characters_escaped() -> None:
    validator = compile_schema({"additionalProperties": {"type": "integer"}}, "w")
    with pytest.raises(DefinitionError) as refused:
        check_input(validator, {"a\x1b[2Jb": "x"}, "w")
    message = str(refused.value)
    assert "\x1b" not in message and "a\\x1b[2Jb" in message
