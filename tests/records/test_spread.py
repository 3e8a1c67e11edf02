"""The interval of the median and the verdict of two figures (pipeline/records/spread.py), on fixed samples whose
intervals are worked by hand from the binomial formula; the harness's spread of a record from its child's raw call
times."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pipeline.records.spread import (
    MIN_REPEATS,
    median_interval,
    record_spread,
    scaled,
    verdict,
    verdict_counts,
)


def coverage(n: int, k: int) -> float:
    """The coverage of ``[x(k), x(n+1-k)]`` for the median of ``n`` repeats: ``1 - 2 P(B <= k-1)``."""
    return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n


#: Ten call times, shuffled: sorted they are 0.10, 0.11, ..., 0.19.
TEN = [0.14, 0.11, 0.19, 0.10, 0.16, 0.12, 0.18, 0.13, 0.17, 0.15]


def test_the_interval_of_ten_repeats_is_the_second_to_the_ninth() -> None:
    # B ~ Binomial(10, 1/2): P(B <= 0) = 1/1024, P(B <= 1) = 11/1024 = 0.0107 <= 0.025, P(B <= 2) = 56/1024 = 0.0547
    # > 0.025, so k = 2: [x(2), x(9)], coverage 1 - 22/1024 = 0.978515625.
    assert median_interval(TEN) == (0.11, 0.18)
    assert coverage(10, 2) == 1 - 22 / 1024 == 0.978515625
    assert coverage(10, 3) == 1 - 112 / 1024 < 0.95  # the next pair in is too short


def test_six_repeats_are_the_fewest_and_twenty_reach_the_sixth() -> None:
    assert MIN_REPEATS == 6
    assert median_interval([3.0, 1.0, 2.0, 6.0, 5.0, 4.0]) == (1.0, 6.0)  # 1 - 2/64 = 0.96875
    assert coverage(6, 1) == 0.96875 and coverage(5, 1) == 0.9375 < 0.95
    assert median_interval([1.0, 2.0, 3.0, 4.0, 5.0]) is None  # five: at most 93.75 %
    # twenty: sum C(20, i) for i <= 5 is 21700, 21700 / 2^20 = 0.0207 <= 0.025; with i = 6, 0.0577: k = 6
    assert median_interval([float(i) for i in range(20, 0, -1)]) == (6.0, 15.0)
    assert math.isclose(coverage(20, 6), 1 - 2 * 21700 / 2**20)


def test_a_figure_made_from_the_call_time_carries_its_interval() -> None:
    assert scaled(100.0, 1.0, (0.8, 1.25), rate=True) == (80.0, 125.0)  # tokens/s: the inverse
    assert scaled(2.0, 1.0, (0.8, 1.25), rate=False) == (1.6, 2.5)  # seconds per image: proportional


@pytest.mark.parametrize(
    ("old", "new", "old_i", "new_i", "expected"),
    [
        (100.0, 104.0, (90.0, 110.0), (95.0, 115.0), "within_noise"),  # intervals overlap
        (100.0, 104.0, (99.0, 101.0), (103.0, 105.0), "within_noise"),  # apart, but 4 % is under the 5 % floor
        (100.0, 50.0, (90.0, 110.0), (45.0, 55.0), "changed"),  # 2x slower: apart and 50 %
        (100.0, 130.0, None, None, "no_interval"),  # measured once per run
        (100.0, 130.0, (90.0, 110.0), None, "no_interval"),  # one side without
        (0.0, 0.0, None, None, "within_noise"),  # equal values need no interval
        (None, 130.0, None, None, None),
    ],
)
def test_the_verdict(
    old: float, new: float, old_i: tuple[float, float], new_i: tuple[float, float], expected: str
) -> None:
    assert verdict(old, new, old_i, new_i) == expected


def test_the_verdicts_counted() -> None:
    entries = [{"speed_pct": 1.0, "speed_pct_verdict": "within_noise"}, {"speed_pct": -50.0, "speed_pct_verdict":
               "changed"}, {"speed_pct": 3.0}, {"speed_pct": None}]  # fmt: skip
    assert verdict_counts(entries, "speed_pct") == "1 changed, 1 unchanged (within noise), 1 no interval: cannot tell"
    assert verdict_counts([], "speed_pct") == "—"


def test_the_record_spread_of_a_text_generation() -> None:
    ttfts = [0.01] * 10
    latencies = [t + 0.01 for t in TEN]  # decode times: TEN
    p50 = 0.155  # median of latencies; decode p50 = 0.145
    metrics = {"latency_s": {"p50": p50, "p90": 0.2}, "ttft_s": 0.01, "decode_tokens_per_s": 145.0}
    out = record_spread("text-generation", 1, metrics, {"latencies_s": latencies}, {"ttfts_s": ttfts})
    assert out is not None and out["repeats"] == 10
    assert (out["latency_low_s"], out["latency_high_s"]) == pytest.approx((0.12, 0.19))
    # 145 tokens/s at a 0.145 s decode; its interval (0.11, 0.18) s: 145 * 0.145 / 0.18 .. 145 * 0.145 / 0.11
    assert (out["speed_low"], out["speed_high"]) == pytest.approx((145 * 0.145 / 0.18, 145 * 0.145 / 0.11))
    assert (
        record_spread("text-generation", 1, metrics, {"latencies_s": latencies[:5]}, {}) is None
    )  # five repeats: no interval


def _row(speed: float, low: float | None, high: float | None, **changes: object) -> dict[str, object]:
    from pipeline.records import flatten
    from tests.support.records import sample_record

    metrics = {"decode_tokens_per_s": speed}
    if low is not None:
        metrics["spread"] = {"repeats": 10, "latency_low_s": 1.0, "latency_high_s": 1.2, "speed_low": low,
                             "speed_high": high}  # fmt: skip
    return {**flatten(sample_record(metrics=metrics)), **changes}


def test_a_pass_measured_again_on_the_same_stack_is_reproduced_or_flagged() -> None:
    from pipeline.records import remeasured

    first = _row(100.0, 95.0, 105.0)
    assert remeasured(first, _row(103.0, 98.0, 108.0)) == "reproduced"  # intervals overlap
    assert remeasured(first, _row(50.0, 47.5, 52.5)) == "disagrees"  # twice as slow, intervals apart
    assert remeasured(first, _row(50.0, None, None)) is None  # no interval: cannot tell
    assert remeasured(first, _row(50.0, 47.5, 52.5, revision="f" * 40)) is None  # another revision: not a repeat
    assert remeasured(first, _row(50.0, 47.5, 52.5, neuronx_cc_version="9.9.9")) is None  # another toolchain
    assert remeasured(None, first) is None and remeasured({**first, "status": "fail"}, first) is None


def test_a_compare_ratio_carries_its_interval_and_is_too_close_to_call_across_one() -> None:
    from pipeline.page.compare import speed_ratio
    from pipeline.records import ratio_interval

    trn = {"speed_low": 140.0, "speed_high": 160.0}
    gpu = {"speed_low": 90.0, "speed_high": 110.0}
    # 140 / 110 = 1.27 .. 160 / 90 = 1.78: the far ends divided
    assert ratio_interval(trn, gpu) == pytest.approx((140 / 110, 160 / 90))
    assert speed_ratio(trn, gpu, "×1.50") == "×1.50 (1.27–1.78)"
    close = {"speed_low": 130.0, "speed_high": 170.0}
    assert speed_ratio(close, {"speed_low": 120.0, "speed_high": 150.0}, "×1.11") == "×1.11, too close to call"
    assert speed_ratio(trn, {}, "×1.50") == "×1.50"  # no interval: the ratio alone
    assert speed_ratio(trn, gpu, "—") == "—"  # no ratio (a side failed, or another source)


def test_the_page_reads_a_latest_shard_written_before_the_spread_columns(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.dataset.layout import LATEST_DIR
    from pipeline.dataset.read import LatestBatches

    (tmp_path / LATEST_DIR).mkdir(parents=True)
    pq.write_table(pa.table({"model_id": ["org/a"], "status": ["pass"]}), tmp_path / LATEST_DIR / "old.parquet")
    batches = LatestBatches(tmp_path, ["model_id", "speed_low"])
    assert [row for part in batches for row in part] == [{"model_id": "org/a"}]
    with pytest.raises(KeyError):  # a required column missing still fails
        list(LatestBatches(tmp_path, ["model_id", "task"]))
