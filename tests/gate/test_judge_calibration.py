"""The chat judge keeps System One's thresholds (docs/judge-calibration.md): rounded to a model's
grid, its probabilities change a decision only just below a threshold, and no threshold of its
own would change fewer."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "judge_calibration.py"


@pytest.fixture(scope="module")
def calibration():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("judge_calibration", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("step", [0.1, 0.05])
def test_the_current_thresholds_suit_the_chat_judge(calibration, step: float):  # type: ignore[no-untyped-def]
    from realmem.config import DEFAULTS

    sweeps = calibration.measure(step)
    assert {s.rule for s in sweeps} == set(calibration.rules.THRESHOLD_KEYS)
    for rule in {s.rule for s in sweeps}:
        current = float(DEFAULTS[f"gate.{rule}"])
        mine = [s for s in sweeps if s.rule == rule]
        at_current, = (s for s in mine if s.chat_threshold == current)
        assert len(at_current.differ) == min(len(s.differ) for s in mine), rule
        # only values a model would round up onto the threshold decide otherwise
        assert all(current - step <= v < current for v in at_current.differ), (rule, at_current.differ)
    picks = [s for s in sweeps if s.rule == "conflictWith" and s.chat_threshold == 0.6]
    assert picks[0].differ  # rounding does move decisions near a threshold: the sweep reaches that band
