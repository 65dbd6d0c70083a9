"""Which fact files a test's own process reads (a helper process's reads are its own)."""

from __future__ import annotations

import os

import pytest

from realmem.write import factfiles


def read_in_scan(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the fact files this process reads from now on."""
    reads: list[str] = []
    real = factfiles.read_regular

    def counting(path: str, **kw: object) -> bytes:
        reads.append(os.path.basename(path))
        return real(path, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(factfiles, "read_regular", counting)
    return reads
