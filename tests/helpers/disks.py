"""Directories that fail as real disks do: read-only and full.

As root, chmod is ignored, so a read-only directory is a read-only bind mount of itself, and
a full one a small tmpfs filled to the last byte (a real ENOSPC).  As another user the
read-only case is chmod 0500; a full disk needs a mount, so those tests are skipped.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = os.geteuid() == 0


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, text=True)


def _umount(d: Path) -> None:
    # Lazy: a connection this process still holds (the lease's) must not leave the mount behind.
    subprocess.run(["umount", "--lazy", str(d)], check=True, capture_output=True, text=True)


@contextlib.contextmanager
def read_only(d: Path) -> Iterator[None]:
    """``d`` (an existing directory) cannot be written inside the block."""
    if not ROOT:
        mode = d.stat().st_mode & 0o7777
        d.chmod(0o500)
        try:
            yield
        finally:
            d.chmod(mode)
        return
    try:
        _mount("--bind", str(d), str(d))
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"root, but a bind mount is not allowed here ({exc}): chmod would be ignored")
    try:
        _mount("-o", "remount,ro,bind", str(d))
        yield
    finally:
        _umount(d)


@contextlib.contextmanager
def full(d: Path, size_kb: int = 256) -> Iterator[None]:
    """``d`` (an existing, empty directory) becomes a small tmpfs with no byte left inside the
    block; what was written there is gone after it (the tmpfs is unmounted)."""
    if not ROOT:
        pytest.skip("a full disk needs a tmpfs mount, which needs root (RLIMIT_FSIZE gives EFBIG, not ENOSPC)")
    try:
        _mount("-t", "tmpfs", "-o", f"size={size_kb}k,mode=0700", "tmpfs", str(d))
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"tmpfs cannot be mounted here ({exc})")
    try:
        yield
    finally:
        _umount(d)


def fill(d: Path) -> Path:
    """Write a filler file into ``d`` until its filesystem is full; returns it (remove it to
    make room again)."""
    filler = d / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    with contextlib.suppress(OSError):  # the last partial block
        with open(filler, "ab", buffering=0) as f:
            while True:
                f.write(b"\0")
    return filler
