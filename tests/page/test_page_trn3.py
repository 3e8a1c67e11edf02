"""The page keeps a Trainium3 row apart from the Trainium2 ones: its own Device filter value and badge, never in the
Trainium2 counts, never the Trainium2 side of Compare, never in a Trainium2 row's place."""

from __future__ import annotations

from typing import Any

from pipeline import page
from pipeline.page.catalog import entry_fields
from pipeline.page.compare import compare_pairs
from pipeline.records import representative
from tests.page.test_page import _gpu_row, at, inline_of, render, row

TRN3 = {"name": "trn3.48xlarge", "instance_type": "trn3.48xlarge", "accelerator": "trainium3"}


def trn3_row(model_id: str, **overrides: Any) -> dict[str, Any]:
    return row(model_id, hardware=TRN3, **overrides)


def test_a_trainium3_row_is_its_own_device_on_the_page() -> None:
    latest = [row("acme/llama-1b", **at(1)), trn3_row("acme/qwen-1b", **at(2))]
    data = page.catalog(latest=latest, rankings=[], exclusions=[], history=latest)
    devices = {e["id"]: e["device"] for e in map(entry_fields, data["entries"])}
    assert devices == {"acme/llama-1b": "neuron", "acme/qwen-1b": "trainium3"}
    assert data["default"]["device"] == "neuron"
    html = render(latest=latest)
    assert '<option value="trainium3">Trainium3</option>' in html
    assert "1 models measured on Trainium2: 1 run, 0 fail." in html  # the Trainium3 row is not counted
    assert "1 row was measured on Trainium3 instead" in html
    # The first view shows Trainium2 rows; under the Trainium3 filter its rows carry the device badge.
    (trn3,) = [e for e in inline_of(html)["text-generation"] if e["device"] == "trainium3"]
    assert 'title="measured on Trainium3, not on Trainium2">Trainium3</span>' in trn3["row"]
    assert 'title="measured on Trainium3, not on Trainium2">Trainium3</span>' in render(latest=latest[1:])


def test_a_trainium3_row_never_takes_a_trainium2_row_s_place() -> None:
    trn2, trn3 = row("acme/llama-1b", **at(1)), trn3_row("acme/llama-1b", **at(9))
    assert representative([trn3, trn2])["hardware"] == "trn2.48xlarge"  # the newer Trainium3 pass comes second
    data = page.catalog(latest=[trn3, trn2], rankings=[], exclusions=[], history=[trn3, trn2])
    (entry,) = map(entry_fields, data["entries"])
    assert entry["device"] == "neuron" and all(line[2] == "neuron" for line in entry["hist"])


def test_compare_never_sets_a_trainium3_row_as_the_trainium2_side() -> None:
    assert compare_pairs([trn3_row("acme/qwen-1b"), _gpu_row("acme/qwen-1b")]) == []
    gpu, trn3 = compare_pairs([trn3_row("acme/llama-1b", **at(9)), row("acme/llama-1b"), _gpu_row("acme/llama-1b")])
    assert [s["badge"] for s in gpu["sides"]] == ["Trainium2", "cuda"] and gpu["other"] == "GPU"
    assert [s["badge"] for s in trn3["sides"]] == ["Trainium2", "Trainium3"] and trn3["other"] == "Trainium3"


def test_compare_sets_a_models_trainium2_row_beside_its_trainium3_row() -> None:
    """Issue 33: "the page and trncat check keep them apart and can compare them". The pair's ratio line divides the
    Trainium2 figure by the Trainium3 one, each side badged with its own device and hardware."""
    figures = ("decode_tokens_per_s", "peak_device_memory_bytes")
    trn2 = {**row("acme/llama-1b", **at(1)), **dict(zip(figures, (50.0, 4 * 2**30), strict=True))}
    trn3 = {**trn3_row("acme/llama-1b", **at(2)), **dict(zip(figures, (100.0, 2 * 2**30), strict=True))}
    (pair,) = compare_pairs([trn2, trn3])
    assert (
        pair["other"] == "Trainium3"
        and pair["ratios"]["speed"] == "\u00d70.50"
        and pair["ratios"]["mem"] == "\u00d72.00"
    )
    assert [(s["device"], s["hw"]) for s in pair["sides"]] == [
        ("neuron", "trn2.48xlarge"),
        ("trainium3", "trn3.48xlarge"),
    ]
    html = render(latest=[trn2, trn3])
    assert "Trainium2 ÷ Trainium3" in html
    assert 'title="measured on Trainium3, not on Trainium2">Trainium3</span>' in html
    # a failed Trainium3 run: the pair stays, its ratios say nothing
    (failed,) = compare_pairs([trn2, {**trn3, "status": "fail"}])
    assert set(failed["ratios"].values()) == {"\u2014"}
