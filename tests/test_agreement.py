"""Agreement statistics against the libraries: krippendorff.alpha, scipy.stats.spearmanr, on known and random data."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from scipy import stats

from masc_core import MascError, MascInputError
from masc_core.evaluation import agreement
from masc_core.evaluation.agreement import (
    compare,
    fit_mapping,
    inter_rater,
    interval_alpha,
    krippendorff_alpha,
    spearman,
)

NAN = np.nan
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the
# worked example: 4 coders, 12 units, missing values. Published alphas:
# nominal 0.743, interval 0.849.
TEXTBOOK = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
        [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
    ]
)


def test_textbook_example():
    assert krippendorff.alpha(TEXTBOOK, level_of_measurement="interval") == pytest.approx(0.849, abs=5e-4)
    assert interval_alpha(TEXTBOOK) == pytest.approx(
        krippendorff.alpha(TEXTBOOK, level_of_measurement="interval"), abs=1e-12
    )
    assert krippendorff_alpha(TEXTBOOK) == pytest.approx(0.849, abs=5e-4)


@pytest.mark.parametrize("coders,units,missing", [(2, 30, 0.0), (3, 50, 0.3), (5, 20, 0.5)])
def test_closed_form_equals_the_package(coders, units, missing):
    rng = np.random.default_rng(coders * 100 + units)
    data = np.round(rng.normal(2, 1, (coders, units)) + rng.normal(0, 1, units)[None], 2)
    data[rng.random(data.shape) < missing] = NAN
    expected = krippendorff.alpha(data, level_of_measurement="interval")
    assert interval_alpha(data) == pytest.approx(expected, abs=1e-12)
    # Each bootstrap row equals the package on the resampled columns.
    draws = rng.integers(0, units, size=(5, units))
    for row, value in zip(draws, interval_alpha(data, draws)):
        assert value == pytest.approx(krippendorff.alpha(data[:, row], level_of_measurement="interval"), abs=1e-12)


def test_large_continuous_data_use_the_closed_form(monkeypatch):
    rng = np.random.default_rng(3)
    human = rng.integers(0, 5, 3000).astype(float)
    metric = human + rng.normal(0, 1.5, 3000)
    calls = []
    monkeypatch.setattr(krippendorff, "alpha", lambda *a, **k: calls.append(1) or 0.0)
    value = krippendorff_alpha(np.stack([human, metric]))
    assert calls == []  # 3000 x 3000^2 elements: the package would need ~200 GB
    assert value == interval_alpha(np.stack([human, metric]))  # checked against the package above
    assert 0.0 < value < 1.0


def test_small_data_use_the_package(monkeypatch):
    seen = []
    real = krippendorff.alpha
    monkeypatch.setattr(krippendorff, "alpha", lambda *a, **k: seen.append(1) or real(*a, **k))
    assert krippendorff_alpha(TEXTBOOK) == pytest.approx(0.849, abs=5e-4)
    assert seen == [1]


def test_undefined_alpha_is_none():
    assert krippendorff_alpha(np.array([[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]])) is None
    assert krippendorff_alpha(np.array([[1.0, NAN], [NAN, 2.0]])) is None  # nothing pairable


def test_spearman_matches_scipy():
    rng = np.random.default_rng(5)
    x = rng.normal(size=60)
    y = np.round(x + rng.normal(size=60))  # ties
    rho, p_value = spearman(x, y)
    expected = stats.spearmanr(x, y)
    assert rho == pytest.approx(expected.statistic, abs=1e-15) and p_value == pytest.approx(expected.pvalue, rel=1e-12)
    assert spearman(x, np.ones(60)) == (None, None)
    draws = rng.integers(0, 60, size=(4, 60))
    for row, value in zip(draws, agreement.spearman_resampled(x, y, draws)):
        assert value == pytest.approx(stats.spearmanr(x[row], y[row]).statistic, abs=1e-12)


def test_average_ranks_and_rho_match_scipy_without_importing_it():
    rng = np.random.default_rng(7)
    values = np.round(rng.normal(size=(6, 40)), 1)  # many ties
    values[2, 5] = NAN  # a row with NaN: all NaN, as rankdata propagates it
    expected = stats.rankdata(values, axis=-1)
    got = agreement.average_ranks(values)
    assert np.array_equal(np.isnan(got), np.isnan(expected)) and np.allclose(
        got[~np.isnan(got)], expected[~np.isnan(expected)]
    )
    assert np.array_equal(agreement.average_ranks([3.0, 1.0, 3.0, 2.0]), [3.5, 1.0, 3.5, 2.0])
    x, y = rng.normal(size=30), np.round(rng.normal(size=30))
    assert agreement.spearman_rho(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert agreement.spearman_rho(x, np.zeros(30)) is None


def test_minmax_mapping():
    values = np.array([-0.2, 0.1, 0.4, 0.8])
    mapping = fit_mapping(values, (0.0, 4.0))
    mapped = mapping.apply(values)
    assert mapped[0] == pytest.approx(0.0) and mapped[-1] == pytest.approx(4.0)
    assert mapped[1] == pytest.approx(4 * 0.3 / 1.0)
    assert fit_mapping(values, (1.0, 5.0)).apply(values)[-1] == pytest.approx(5.0)
    assert np.array_equal(fit_mapping(values, kind="none").apply(values), values)
    assert np.all(fit_mapping([0.3, 0.3]).apply([0.3, 0.3]) == 2.0)
    assert mapping.to_dict() == {"kind": "minmax", "scale": [0.0, 4.0], "metric_min": -0.2, "metric_max": 0.8}
    with pytest.raises(MascInputError, match="rating scale 4..0 is empty"):
        fit_mapping(values, (4.0, 0.0))


def test_compare_mapping_changes_alpha_not_rho_and_is_seeded():
    rng = np.random.default_rng(11)
    human = rng.integers(0, 5, 80).astype(float)
    metric = 0.5 + 0.05 * human + rng.normal(0, 0.05, 80)  # cosines: a narrow band, not 0..4
    mapped = {"m": fit_mapping(metric)}
    raw = {"m": fit_mapping(metric, kind="none")}
    a = compare({"m": metric}, human, mapped, bootstrap=200, seed=1, label="x")["m"]
    b = compare({"m": metric}, human, raw, bootstrap=200, seed=1, label="x")["m"]
    assert a["spearman"] == b["spearman"] == pytest.approx(stats.spearmanr(metric, human).statistic)
    expected = krippendorff.alpha(np.stack([human, mapped["m"].apply(metric)]), level_of_measurement="interval")
    assert a["krippendorff_alpha"] == pytest.approx(expected, abs=1e-12)
    assert a["krippendorff_alpha"] > 0.3 > b["krippendorff_alpha"]  # raw cosines barely agree in absolute terms
    again = compare({"m": metric}, human, mapped, bootstrap=200, seed=1, label="x")["m"]
    other = compare({"m": metric}, human, mapped, bootstrap=200, seed=2, label="x")["m"]
    assert again["ci95"] == a["ci95"] and other["ci95"] != a["ci95"]
    low, high = a["ci95"]["krippendorff_alpha"]
    assert low < a["krippendorff_alpha"] < high
    low, high = a["ci95"]["spearman"]
    assert low < a["spearman"] < high
    assert compare({"m": metric}, human, mapped, bootstrap=0)["m"]["ci95"] == {
        "krippendorff_alpha": None,
        "spearman": None,
    }


def test_inter_rater_matches_the_package():
    result = inter_rater(TEXTBOOK, bootstrap=100, seed=0)
    assert result["krippendorff_alpha"] == pytest.approx(
        krippendorff.alpha(TEXTBOOK, level_of_measurement="interval"), abs=1e-12
    )
    assert result["n"] == 11  # the last unit has one value: not pairable
    assert result["ci95"][0] < result["krippendorff_alpha"] < result["ci95"][1]


def test_missing_dependency_is_one_line():
    with pytest.raises(MascError, match=r"need the 'no_such_module' package: pip install 'masc-comfyui\[eval\]'"):
        agreement.require("no_such_module")
