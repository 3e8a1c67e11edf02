"""The page's serving section without a browser: escaping, the emulated label, the pairs' ratios."""

from __future__ import annotations

from pipeline.page.serving import serving_curve, serving_entries, serving_pairs, serving_section
from pipeline.testing.records import sample_serving


def test_every_label_in_the_curve_is_escaped() -> None:
    record = sample_serving(device="neuron")
    record["hardware"]["name"] = '<b onmouseover="x">trn2</b>'
    svg = str(serving_curve(record["model_id"], serving_entries([record])))
    assert "<b " not in svg and "&lt;b onmouseover=&#34;x&#34;&gt;trn2&lt;/b&gt;" in svg


def test_an_emulated_row_is_labelled_so_and_gets_no_ratio() -> None:
    emulated = sample_serving(device="neuron")
    emulated["hardware"]["emulated"] = True
    gpu = sample_serving(device="cuda")
    entries = serving_entries([emulated, gpu])
    assert entries[0]["badge"] == "Trainium2 (emulated)"
    (pair,) = serving_pairs(entries)
    assert pair["ratios"] == {"at_slo": "\u2014", "usd": "\u2014"}


def test_the_ratios_are_trainium2_over_gpu_at_the_slo() -> None:
    (pair,) = serving_pairs(serving_entries([sample_serving(device="neuron"), sample_serving(device="cuda")]))
    trn, gpu = pair["sides"]
    assert pair["ratios"]["at_slo"] == f"\u00d7{trn['at_slo'] / gpu['at_slo']:.2f}" == "\u00d70.67"
    assert serving_section([]) is None
