"""The shared Lua helpers (``engine/store/lua/lib``) are joined in an order that works."""

from __future__ import annotations

import re
from importlib import resources

import redis

from engine import EmbeddedRedis
from engine.store.scripts import (
    _COMMENT,
    FIELD_NAMES,
    LIB,
    SCRIPT_NAMES,
    _lib_blocks,
    library,
    script_source,
)

_STRING = re.compile(r"'[^'\n]*'")
_TOP = re.compile(r"^local (?:function (\w+)\(|([\w, ]+?)\s*=)", re.MULTILINE)


def test_every_helper_is_defined_before_a_helper_uses_it() -> None:
    # A Lua local exists from its definition on: a helper named before it is defined
    # would be a global (an error in Redis) when the call runs.
    blocks, where = _lib_blocks()
    for i, (names, _, words) in enumerate(blocks):
        later = {n for n, j in where.items() if j > i}
        used = {w for w in words if w in later} - names
        # key names inside strings (':events', ':wake:') are not uses
        text = _STRING.sub("", blocks[i][1])
        used = {w for w in used if re.search(rf"\b{w}\b", text)}
        assert not used, (sorted(names), sorted(used))


def test_each_library_file_is_one_titled_concept_in_the_library() -> None:
    lib = library()
    for name in LIB:
        text = (resources.files("engine.store") / "lua" / "lib" / f"{name}.lua").read_text()
        title, body = text.split("\n\n", 1)
        assert title.startswith(f"-- lib/{name}.lua: ")
        assert body in lib


def test_scripts_carry_few_enough_locals() -> None:
    # Lua allows 200 locals in the main chunk: each script takes only the helpers it uses.
    for name in SCRIPT_NAMES:
        assert len(_TOP.findall(script_source(name))) < 180, name


# Locals each script must have room for beyond its own: Lua allows 200 live at once in a
# chunk, the library's helpers a script takes and its body's own (its loops' too).
SPARE_LOCALS = 5


def test_every_script_compiles_with_room_for_more_locals(redis_server: EmbeddedRedis) -> None:
    # SCRIPT LOAD compiles and runs nothing: each script with SPARE_LOCALS more locals
    # live from its first line on, so a helper more does not meet Lua's limit unawares.
    client = redis.Redis.from_url(redis_server.url)
    spare = "local " + ", ".join(f"spare{k}" for k in range(SPARE_LOCALS)) + "\n"
    try:
        for name in SCRIPT_NAMES:
            try:
                client.script_load(spare + script_source(name))
            except redis.ResponseError as e:
                raise AssertionError(f"{name}: {e}") from None
    finally:
        client.close()


def test_every_field_name_the_lua_uses_is_declared_once_in_python() -> None:
    # F_LEFT in Lua is codec.fields.F_LEFT: a name Python does not declare would be an
    # undefined global in Redis; each script declares only the names it uses.
    root = resources.files("engine.store") / "lua"
    texts = [root.joinpath(f"{n}.lua").read_text() for n in SCRIPT_NAMES]
    texts += [root.joinpath("lib", f"{n}.lua").read_text() for n in LIB]
    named = {w for t in texts for w in re.findall(r"\b[FDMTI]_[A-Z_]+\b", _COMMENT.sub("", t))}
    assert named, "the Lua names its fields"
    assert named <= FIELD_NAMES.keys(), sorted(named - FIELD_NAMES.keys())
    for name in SCRIPT_NAMES:
        source = script_source(name)
        declared = set(re.findall(r"^local ([FDMTI]_[A-Z_]+) = '", source, re.MULTILINE))
        code = _COMMENT.sub("", source.split("\n", len(declared))[-1])
        assert declared == set(re.findall(r"\b[FDMTI]_[A-Z_]+\b", code)), name
        assert all(FIELD_NAMES[n] in source for n in declared)


def test_task_definition_and_map_fields_go_by_their_names_in_the_lua() -> None:
    # `i .. 'o'` would be a second spelling of T_OUTPUT: a field named by a task, item or
    # map index plus a suffix, and a definition's feature letter, say its fields.py name.
    root = resources.files("engine.store") / "lua"
    suffixes = {v for n, v in FIELD_NAMES.items() if n[0] in "TDMI"}
    files = [f"{n}.lua" for n in SCRIPT_NAMES if n != "template"]  # a template's own hash
    files += [f"lib/{n}.lua" for n in LIB if n != "history"]  # the history hashes'
    for name in files:
        code = _COMMENT.sub("", root.joinpath(name).read_text())
        spelled = [s for s in re.findall(r"\.\.\s*'([^'\n]*)'", code) if s in suffixes]
        spelled += re.findall(r"has_feature\([^,()]+,\s*'([^']*)'\)", code)
        assert not spelled, (name, spelled)
