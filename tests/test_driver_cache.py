"""Playwright's driver keeps what Node compiled of it (`devices/driver_cache.py`): the folder it
uses, a user's own choice left alone, and a damaged cache that costs nothing but the compiling."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from devices.clone_browser import BrowserPool
from devices.driver_cache import CACHE_VAR, DISABLE_VAR, cache_folder, use_node_compile_cache


@pytest.fixture
def no_cache_set(monkeypatch, tmp_path):
    """A process whose user set neither variable, with its cache home in the test's folder
    (monkeypatch puts the environment back, the variable this module sets included)."""
    monkeypatch.delenv(CACHE_VAR, raising=False)
    monkeypatch.delenv(DISABLE_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "realbench" / "node-compile-cache"


def test_the_folder_is_under_the_users_cache_home(no_cache_set) -> None:
    assert cache_folder() == no_cache_set
    assert use_node_compile_cache() == no_cache_set
    assert os.environ[CACHE_VAR] == str(no_cache_set) and no_cache_set.is_dir()


def test_a_folder_the_user_named_is_kept(no_cache_set, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(CACHE_VAR, str(tmp_path / "mine"))
    assert use_node_compile_cache() == tmp_path / "mine"
    assert os.environ[CACHE_VAR] == str(tmp_path / "mine") and not no_cache_set.exists()


def test_a_cache_the_user_switched_off_stays_off(no_cache_set, monkeypatch) -> None:
    monkeypatch.setenv(DISABLE_VAR, "1")
    assert use_node_compile_cache() is None
    assert CACHE_VAR not in os.environ and not no_cache_set.exists()


def test_no_writable_folder_means_no_cache(no_cache_set, monkeypatch, tmp_path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert use_node_compile_cache() is None
    assert CACHE_VAR not in os.environ


def test_no_home_means_no_cache_not_a_folder_named_tilde(no_cache_set, monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: Path("~")))  # expanduser's last resort
    monkeypatch.chdir(tmp_path)
    assert use_node_compile_cache() is None
    assert CACHE_VAR not in os.environ and not (tmp_path / "~").exists()


def _entries(folder: Path) -> dict[Path, int]:
    return {p: p.stat().st_size for p in folder.rglob("*") if p.is_file()}


@pytest.mark.browser
def test_a_driver_writes_its_compiled_code_and_a_damaged_cache_only_costs_compiling(no_cache_set) -> None:
    with BrowserPool() as pool:
        assert pool.running and pool.version
    written = _entries(no_cache_set)
    # the driver's own modules, written by Node as the driver exits
    assert written and sum(written.values()) > 100_000, written
    damaged: dict[Path, bytes] = {}
    for path in written:  # every entry damaged past its header
        data = bytearray(path.read_bytes())
        for i in range(64, len(data), 97):
            data[i] ^= 0xFF
        damaged[path] = bytes(data)
        path.write_bytes(damaged[path])
    with BrowserPool() as pool:
        assert pool.running and pool.version
    # Node found every entry's checksum wrong, compiled afresh and wrote each entry again (an
    # entry it can use it leaves as it is: two runs on a sound cache leave the same bytes)
    after = {path: path.read_bytes() for path in _entries(no_cache_set)}
    assert set(after) == set(damaged)
    assert all(after[path] != damaged[path] for path in damaged)


@pytest.mark.browser
def test_a_sound_cache_is_read_not_written_again(no_cache_set) -> None:
    with BrowserPool():
        pass
    first = {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in _entries(no_cache_set)}
    with BrowserPool():
        pass
    assert (
        first
        and {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in _entries(no_cache_set)} == first
    )
