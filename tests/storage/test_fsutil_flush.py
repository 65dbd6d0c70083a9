"""Flushing files written without an fsync: each file, then each directory, and never the
whole machine's dirty pages unless there are so many files that one os.sync is cheaper."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from realmem.storage import fsutil


def _spy_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))  # the path the descriptor names (Linux)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names descriptors through /proc")
def test_flush_fsyncs_each_file_then_each_directory_and_skips_what_is_gone(tmp_path: Path, monkeypatch) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    paths = []
    for i in range(10):
        p = dirs[i % 2] / f"f{i}.md"
        fsutil.atomic_write_text(p, f"fact {i}\n", durable=False)
        paths.append(str(p))
    os.unlink(paths[-1])  # replaced or removed since: nothing to flush there
    synced = _spy_fsyncs(monkeypatch)
    monkeypatch.setattr(os, "sync", lambda: pytest.fail("os.sync flushes every process's files"))

    fsutil.flush_written(paths)

    assert sorted(synced[:9]) == sorted(paths[:9])  # the files first
    assert sorted(synced[9:]) == sorted(str(d) for d in dirs)  # then their directories


def test_beyond_the_limit_one_os_sync_flushes_them_all(tmp_path: Path, monkeypatch) -> None:
    paths = [str(tmp_path / f"f{i}.md") for i in range(5)]
    for p in paths:
        fsutil.atomic_write_text(Path(p), "fact\n", durable=False)
    calls: list[int] = []
    monkeypatch.setattr(fsutil, "FLUSH_ONE_BY_ONE", 4)
    monkeypatch.setattr(os, "sync", lambda: calls.append(1))
    monkeypatch.setattr(os, "fsync", lambda fd: pytest.fail("an fsync per file beyond the limit"))
    fsutil.flush_written(paths)
    fsutil.flush_written([])
    assert calls == [1]
