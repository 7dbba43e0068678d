"""MkDocs hooks (``mkdocs.yml``): the pages that are generated from the code at build
time, and the checks that keep the hand-written references true.

- ``reference/cli.md``: every command of ``redisflow`` and ``redisflow-agent``, walked from
  their argparse parsers (``engine.cli.main.build_parser``), each with its ``--help``.
- ``reference/http-api.md`` and ``reference/openapi.json``: the OpenAPI document the
  server serves at ``/openapi.json``, and every operation of it as a page.
- ``screenshots/*.png``: the console's pictures, kept at the repository's root, served
  by the site as if they were under ``docs/``.
- ``reference/metrics.md`` must name every Prometheus metric the code defines, and
  ``reference/exit-codes.md`` every exit code the CLI defines: the build fails otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
ENGINE = ROOT / "engine"
HELP_WIDTH = "96"  # argparse reads COLUMNS: the same help text on any terminal


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the screenshots and the generated reference pages to the site."""
    for png in sorted((ROOT / "screenshots").glob("*.png")):
        files.append(
            File(
                f"screenshots/{png.name}",
                src_dir=str(ROOT),
                dest_dir=config.site_dir,
                use_directory_urls=config.use_directory_urls,
            )
        )
    schema = _openapi()
    generated = {
        "reference/cli.md": cli_page(),
        "reference/http-api.md": http_page(schema),
        "reference/openapi.json": json.dumps(schema, indent=2) + "\n",
    }
    for path, content in generated.items():
        files.append(File.generated(config, path, content=content))
    _check_metrics(config)
    _check_exit_codes(config)
    return files


# ---- the CLI --------------------------------------------------------------------------


def cli_page() -> str:
    """``reference/cli.md``: every command of both programs, with its help."""
    os.environ["COLUMNS"] = HELP_WIDTH
    from engine.cli import agent_main
    from engine.cli import main as cli_main

    out = [
        "# CLI reference",
        "",
        "Generated from the programs' own argument parsers when this site is built: what",
        "`--help` prints, for every command. Connection options (`--url`, `--namespace`,",
        "the TLS files...) and `--json` go before or after the command. Exit codes:",
        "[Exit codes](exit-codes.md).",
        "",
    ]
    out += _commands(cli_main.build_parser(), "redisflow", level=2)
    out += _commands(agent_main.build_parser(), "redisflow-agent", level=2)
    return "\n".join(out) + "\n"


def _commands(parser: argparse.ArgumentParser, name: str, level: int) -> list[str]:
    text = parser.format_help().rstrip()
    lines = [f"{'#' * min(level, 6)} `{name}`", "", "```text", text, "```", ""]
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        seen: set[int] = set()
        for sub_name, sub in action.choices.items():
            if id(sub) in seen:  # an alias of a command already shown
                continue
            seen.add(id(sub))
            lines += _commands(sub, f"{name} {sub_name}", level + 1)
    return lines


# ---- the HTTP API ---------------------------------------------------------------------


def _openapi() -> dict[str, Any]:
    from engine.http.openapi import schema_for

    return schema_for(secured=True)


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _schema_name(schema: dict[str, Any] | None) -> str:
    if not schema:
        return ""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return f"[`{name}`](#schema-{name.lower()})"
    kind = schema.get("type", "")
    if kind == "array":
        return f"array of {_schema_name(schema.get('items'))}"
    return f"`{kind}`" if kind else "JSON"


def http_page(schema: dict[str, Any]) -> str:
    """``reference/http-api.md``: each operation of the OpenAPI document."""
    info = schema["info"]
    out = [
        "# HTTP API reference",
        "",
        f"{info['title']} {info.get('version', '')}: generated from the OpenAPI "
        "document `redisflow serve` answers at `GET /openapi.json` "
        "([download it](openapi.json)). The [HTTP guide](../http.md) tells how to run the "
        "server, its tokens and its guards. Operations marked *token* need a bearer token "
        "when the server has tokens configured.",
        "",
    ]
    for path, item in schema["paths"].items():
        for method, op in item.items():
            out += _operation(path, method, op)
    out += ["## Schemas", ""]
    for name, body in schema.get("components", {}).get("schemas", {}).items():
        out += [
            f"### {name} {{#schema-{name.lower()}}}",
            "",
            "```json",
            json.dumps(body, indent=2),
            "```",
            "",
        ]
    return "\n".join(out) + "\n"


def _operation(path: str, method: str, op: dict[str, Any]) -> list[str]:
    token = " *token*" if op.get("security") else ""
    out = [f"## `{method.upper()} {path}`{token}", ""]
    for key in ("summary", "description"):
        if op.get(key):
            out += [str(op[key]), ""]
    params = op.get("parameters", [])
    if params:
        out += ["| parameter | in | required | what |", "|---|---|---|---|"]
        for p in params:
            what = p.get("description") or _schema_name(p.get("schema"))
            required = "yes" if p.get("required") else "no"
            out.append(f"| `{p['name']}` | {p['in']} | {required} | {_cell(what)} |")
        out.append("")
    body = op.get("requestBody")
    if body:
        media = body.get("content", {})
        kinds = ", ".join(f"`{m}` {_schema_name(v.get('schema'))}" for m, v in media.items())
        what = _cell(body.get("description", ""))
        out += [f"Body: {kinds}" + (f": {what}" if what else ""), ""]
    responses = op.get("responses", {})
    if responses:
        out += ["| status | what | body |", "|---|---|---|"]
        for code, r in responses.items():
            media = r.get("content", {})
            shape = ", ".join(_schema_name(v.get("schema")) for v in media.values())
            out.append(f"| {code} | {_cell(r.get('description', ''))} | {shape} |")
        out.append("")
    return out


# ---- checks on the hand-written references --------------------------------------------

_METRIC = re.compile(r"MetricFamily\(\s*\"(redisflow_[a-z_]+)\"")
# EXIT_A = 4, or EXIT_A, EXIT_B = 0, 1 (the CLI's); EXIT_CODES = {100: "kind"} (--exec's)
_EXIT = re.compile(r"^EXIT_[A-Z_]+(?:,\s*EXIT_[A-Z_]+)*\s*=\s*(\d+(?:,\s*\d+)*)", re.M)
_EXEC_EXIT = re.compile(r"^EXIT_CODES\b.*=\s*\{(.*)\}", re.M)


def _sources() -> list[str]:
    return [p.read_text() for p in sorted(ENGINE.rglob("*.py"))]


def _check_metrics(config: MkDocsConfig) -> None:
    page = Path(config.docs_dir, "reference", "metrics.md").read_text()
    defined = {m for text in _sources() for m in _METRIC.findall(text)}
    missing = sorted(m for m in defined if f"`{m}" not in page)
    if not defined or missing:
        raise PluginError(f"reference/metrics.md does not list the metrics {missing}")


def _check_exit_codes(config: MkDocsConfig) -> None:
    page = Path(config.docs_dir, "reference", "exit-codes.md").read_text()
    codes: set[int] = set()
    for text in _sources():
        for numbers in _EXIT.findall(text):
            codes.update(int(n) for n in numbers.split(","))
        for pairs in _EXEC_EXIT.findall(text):
            codes.update(int(n) for n in re.findall(r"(\d+)\s*:", pairs))
    missing = sorted(c for c in codes if f"\n| {c} |" not in page)
    if missing:
        raise PluginError(f"reference/exit-codes.md does not list the exit codes {missing}")
