"""Cost at a service level: dollars per million output tokens at each point, and a row's headline pair (the
highest tokens per second per chip that meets the service level, and its dollars per million tokens).

A point's cost is its instance's dated price (``runners/instances.yaml``, :mod:`pipeline.prices`) times the
run's share of the instance (its chips over the instance's) over the output tokens of one hour:
``usd_per_hour x share / (output_tok_s x 3600) x 1e6``. The price with its source and date goes in the record.
"""

from __future__ import annotations

from typing import Any

from pipeline.prices import Price, cost_per_output
from pipeline.serve.workload import ServiceLevel


def cost_points(points: list[dict[str, Any]], chips: int, *, usd_per_hour: float | None, share: float | None) -> None:
    """Each point's tok/s per chip and $/1M output tokens, set in place; None where the price, the share or the
    speed is unknown."""
    for point in points:
        speed = point.get("output_tok_s")
        point["tok_s_per_chip"] = speed / chips if speed is not None and chips >= 1 else None
        point["usd_per_million_tokens"] = None
        if usd_per_hour is not None and share is not None and speed and speed > 0:
            cost = cost_per_output(usd_per_hour=usd_per_hour, share=share, speed=speed, per=1e6, seconds_each=False)
            point["usd_per_million_tokens"] = cost


def meets(point: dict[str, Any], slo: ServiceLevel) -> bool:
    """True when the point served every request and its TTFT and per-user speed at the SLO's percentile hold."""
    ttft = (point.get("ttft_s") or {}).get(slo.percentile)
    tpot = (point.get("tpot_ms") or {}).get(slo.percentile)
    if point.get("success_rate") != 1.0 or ttft is None or not tpot:
        return False
    return bool(ttft <= slo.ttft_s and 1000.0 / tpot >= slo.tok_s_per_user)


def headline(points: list[dict[str, Any]], slo: ServiceLevel) -> dict[str, Any]:
    """The best point that meets ``slo``: its concurrency, tok/s per chip and $/1M tokens (all None if none)."""
    best: dict[str, Any] | None = None
    for point in points:
        if meets(point, slo) and point.get("tok_s_per_chip") is not None:
            if best is None or point["tok_s_per_chip"] > best["tok_s_per_chip"]:
                best = point
    return {
        "concurrency": best["concurrency"] if best else None,
        "tok_s_per_chip": best["tok_s_per_chip"] if best else None,
        "usd_per_million_tokens": best.get("usd_per_million_tokens") if best else None,
    }


def price_record(price: Price | None, *, instance: str | None, option: str, share: float | None) -> dict[str, Any]:
    """The price a record's costs were computed with, with its provenance (all None where unknown)."""
    return {
        "instance_type": instance,
        "option": option if price else None,
        "usd_per_hour": price.usd if price else None,
        "source": price.citation() if price else None,
        "as_of": price.as_of if price else None,
        "region": price.region if price else None,
        "share": share,
    }
