"""The shared Lua helpers (``engine/store/lua/lib``) are joined in an order that works."""

from __future__ import annotations

import re
from importlib import resources

from engine.store.scripts import LIB, SCRIPT_NAMES, _lib_blocks, library, script_source

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
