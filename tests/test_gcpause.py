"""The collector pause around bulk work: always restored, and nested or concurrent pauses end
together."""

import gc
import threading

import pytest

from realmem.gcpause import gc_paused
from realmem.projections import replay
from realmem.write import memories, observe
from realmem.write.attached import open_attached


@pytest.fixture(autouse=True)
def _collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_pause_restores_the_collector_even_on_error():
    with pytest.raises(RuntimeError):
        with gc_paused():
            assert not gc.isenabled()
            raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()


def test_nested_pauses_end_with_the_outermost():
    with gc_paused():
        with gc_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_concurrent_pauses_end_with_the_last_to_leave():
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with gc_paused():
            inside.set()
            leave.wait(30)

    t = threading.Thread(target=other)
    with gc_paused():
        t.start()
        assert inside.wait(30)
    assert not gc.isenabled()  # the other thread is still inside its pause
    leave.set()
    t.join(30)
    assert gc.isenabled()


def test_replay_check_and_a_scan_run_without_cyclic_collection(repo, monkeypatch):
    app = open_attached(cwd=repo)
    assert app.project is not None
    memories.add(app, "Deploys go through make release", "Run make release, never push tags by hand.",
                 store=app.project.shared_store, stored_paths=["."], source="add")
    (app.store_dir(app.project.shared_store) / "hand-written.md").write_text(
        "---\ncaption: Tests run with make test\npaths: [.]\n---\nRun make test before pushing.\n")
    seen = []
    real_fold, real_scan = replay.fold, observe._scan_store
    monkeypatch.setattr(replay, "fold", lambda *a, **k: seen.append(("fold", gc.isenabled())) or real_fold(*a, **k))
    monkeypatch.setattr(observe, "_scan_store", lambda *a, **k: seen.append(("scan", gc.isenabled())) or real_scan(*a, **k))
    try:
        assert replay.check(app).differences == []
        replay.replay(app)
        observe.scan_stores(app)
    finally:
        app.close()
    assert seen and all(not on for _, on in seen), seen
    assert {what for what, _ in seen} == {"fold", "scan"}
    assert gc.isenabled()
