"""benchmarks/estimator_agree.py's exact enumeration against the closed forms: the agree-2
reading of answer j expects p_j + (3/4) p_j (p_j - sum p^2) with k = 8, takes
2 + 6 (1 - sum p^2) answers, and k answers always have the RMSE sigma / sqrt(k); the
standard error it tallies is the judge's own."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "estimator_agree.py"


def script():
    spec = importlib.util.spec_from_file_location("estimator_agree", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("yes", [0.5, 0.75, 0.9])
def test_yes_or_no_readings_follow_the_closed_forms(yes):
    bench = script()
    p = (1 - yes, yes)
    adaptive, fixed = bench.readings(p, 8, 2)
    square = sum(q * q for q in p)
    assert adaptive.bias == pytest.approx(0.75 * yes * (yes - square), abs=1e-12)
    assert adaptive.answers == pytest.approx(2 + 6 * (1 - square), abs=1e-12)
    assert fixed.bias == pytest.approx(0.0, abs=1e-12)
    assert math.sqrt(fixed.mse) == pytest.approx(math.sqrt(yes * (1 - yes) / 8), abs=1e-12)


def test_a_bimodal_judge_is_biased_toward_its_likelier_answer():
    bench = script()
    p = bench.CASES["bimodal (0.3 on 1, 0.7 on 4)"]
    adaptive, _ = bench.readings(p, 8, 2)
    square = sum(q * q for q in p)
    # the expected rating's bias: sum over answers of (value) x (3/4) p_j (p_j - sum p^2)
    by_formula = sum(i * 0.75 * q * (q - square) for i, q in enumerate(p))
    assert adaptive.bias == pytest.approx(by_formula, abs=1e-12)
    assert adaptive.bias == pytest.approx(0.189, abs=5e-4)
