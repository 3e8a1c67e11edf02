"""A serving point's uncertainty (issue 50): the intervals of its medians from one value per measured request, the
throughput's carried through or from repeated rounds, as both load generators' outputs give them, in the dataset's
columns and on the page (the at-SLO figure with its interval, Compare's ratio "too close to call")."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import pytest

from pipeline.records import merge_rounds, point_spread, validate_record
from tests.support.records import sample_serving

#: Ten end-to-end latencies, shuffled: sorted 1.0, 1.1, ..., 1.9 s (their median's interval: [x(2), x(9)]).
TEN = [1.4, 1.1, 1.9, 1.0, 1.6, 1.2, 1.8, 1.3, 1.7, 1.5]


def test_a_point_s_intervals_from_its_requests() -> None:
    """The medians' intervals are order statistics of the requests' own values; the throughput's is the end-to-end
    latency's carried through its inverse (100 tok/s at the median 1.45 s: 100 x 1.45 / 1.8 ... 100 x 1.45 / 1.1);
    a figure with fewer than six values has none, and a point with none at all no spread."""
    spread = point_spread({"output_tok_s": 100.0}, {"e2e_s": TEN, "ttft_s": [0.1] * 5, "tpot_ms": TEN[:6]})
    assert spread is not None and spread["requests"] == 10 and "ttft_s" not in spread
    assert spread["e2e_s"] == [1.1, 1.8] and spread["tpot_ms"] == [1.0, 1.9]
    assert spread["output_tok_s"] == pytest.approx([100 * 1.45 / 1.8, 100 * 1.45 / 1.1])
    assert point_spread({"output_tok_s": 100.0}, {"e2e_s": TEN[:5]}) is None


def test_rounds_keep_the_median_round_and_from_six_on_their_own_interval() -> None:
    def point(speed: float) -> dict[str, Any]:
        return {"concurrency": 4, "output_tok_s": speed, "spread": {"requests": 40, "output_tok_s": [1.0, 2.0]}}

    six = merge_rounds([[point(s)] for s in (10.0, 12.0, 11.0, 13.0, 9.0, 14.0)])
    assert six[0]["output_tok_s"] == 11.0  # the lower median of 9 ... 14: a measured round, not an average
    assert six[0]["spread"] == {"requests": 40, "rounds": 6, "output_tok_s": [9.0, 14.0]}  # [x(1), x(6)]
    three = merge_rounds([[point(s)] for s in (10.0, 12.0, 11.0)])
    assert three[0]["output_tok_s"] == 11.0 and three[0]["spread"]["output_tok_s"] == [1.0, 2.0]  # the requests'


def test_guidellm_s_requests_in_its_measured_window_only() -> None:
    """guidellm's report lists its warm-ups among the successful requests; the window its own figures are computed
    over (ended after it opened, started before it closed) leaves them out. (On this host's reports the intervals
    of TTFT and end-to-end latency are exactly guidellm's own ``percentile_cis.p50``, its counts its
    ``request_totals``.)"""
    from pipeline.serve.loadgen import _spread

    def request(start: float, latency: float) -> SimpleNamespace:
        return SimpleNamespace(request_start_time=start, request_end_time=start + latency, request_latency=latency,
                               time_to_first_token_ms=latency * 100, time_per_output_token_ms=latency * 10)  # fmt: skip

    warmups = [request(0.0, 9.0), request(1.0, 8.5)]  # ended before the window opened at 10 s
    measured = [request(10.0 + i, latency) for i, latency in enumerate(TEN)]
    bench = SimpleNamespace(start_time=10.0, end_time=30.0, requests=SimpleNamespace(successful=warmups + measured),
                            metrics=SimpleNamespace(output_tokens_per_second=SimpleNamespace(
                                total=SimpleNamespace(mean=50.0))))  # fmt: skip
    spread = _spread(bench)["spread"]  # type: ignore[arg-type]
    assert spread["requests"] == 10 and spread["e2e_s"] == [1.1, 1.8]
    assert spread["ttft_s"] == pytest.approx([0.11, 0.18]) and spread["tpot_ms"] == pytest.approx([11.0, 18.0])


def test_vllm_bench_s_detailed_requests_its_failures_left_out() -> None:
    """``--save-detailed``'s lists: a failed request (an error text) is no sample; a TPOT is vLLM's own
    ``(latency - ttft) / (output_len - 1)``."""
    from pipeline.serve.vllmbench import _spread

    result = {"output_throughput": 80.0, "ttfts": [0.1] * 10 + [0.0], "latencies": [*TEN, 0.0],
              "output_lens": [11] * 10 + [0], "errors": [""] * 10 + ["Bad Request"]}  # fmt: skip
    spread = _spread(result)["spread"]
    assert spread["requests"] == 10 and spread["e2e_s"] == [1.1, 1.8] and spread["ttft_s"] == [0.1, 0.1]
    assert spread["tpot_ms"] == pytest.approx([100.0, 170.0])  # (1.1 - 0.1) / 10 s ... (1.8 - 0.1) / 10 s
    assert _spread({"output_throughput": 80.0}) == {}  # a result saved without --save-detailed


def _with_spread(record: dict[str, Any], low: float, high: float) -> dict[str, Any]:
    """``record``'s headline point with a throughput interval of ``low`` ... ``high`` (its figure inside)."""
    point = record["serving"]["points"][-1]
    point["spread"] = {"requests": 48, "e2e_s": [0.9, 1.1], "output_tok_s": [low, high]}
    return record


def test_the_page_shows_the_at_slo_interval_and_a_ratio_too_close_to_call() -> None:
    """The fixture's Trainium2 headline is 280 tok/s per chip, the GPU's 420: x0.67. Intervals apart give the
    ratio's; intervals that overlap make it too close to call; no interval, the bare ratio."""
    from pipeline.page.serving import serving_entries, serving_pairs, slo_cells

    def ratio(trn: tuple[float, float] | None, gpu: tuple[float, float] | None) -> str:
        records = [sample_serving(device="neuron"), sample_serving(device="cuda")]
        for record, span in zip(records, (trn, gpu), strict=True):
            if span:
                _with_spread(record, *span)
        (pair,) = serving_pairs(serving_entries(records))
        return pair["ratios"]["at_slo"]

    assert ratio((260.0, 300.0), (400.0, 440.0)) == "\u00d70.67 (0.59\u20130.75)"
    assert ratio((260.0, 450.0), (400.0, 440.0)) == "\u00d70.67, too close to call"
    assert ratio(None, (400.0, 440.0)) == "\u00d70.67"
    trn = _with_spread(sample_serving(device="neuron"), 260.0, 300.0)
    (entry,) = serving_entries([trn])
    assert entry["at_slo_text"] == "280 (260\u2013300)"
    (cell,) = slo_cells([trn]).values()
    assert "its 95 % interval: 280 (260\u2013300)" in cell["slop"]


def test_a_reversed_interval_is_invalid_and_the_dataset_keeps_the_intervals() -> None:
    from pipeline.dataset.serving import point_rows

    record = _with_spread(sample_serving(device="neuron"), 260.0, 300.0)
    assert validate_record(record) == []
    rows = point_rows(record)
    assert (rows[-1]["output_tok_s_low"], rows[-1]["output_tok_s_high"], rows[-1]["spread_requests"]) == (260, 300, 48)
    assert (rows[-1]["e2e_p50_s_low"], rows[0]["e2e_p50_s_low"], rows[0]["spread_rounds"]) == (0.9, None, None)
    reversed_ = copy.deepcopy(record)
    reversed_["serving"]["points"][-1]["spread"]["e2e_s"] = [1.1, 0.9]
    assert [f for f, _ in validate_record(reversed_)] == ["serving.points.3.spread.e2e_s"]
