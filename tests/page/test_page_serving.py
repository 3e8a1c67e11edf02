"""The page's serving section without a browser: escaping, the emulated label, the pairs' ratios."""

from __future__ import annotations

import copy

from pipeline.page.serving import serving_curve, serving_entries, serving_pairs, serving_section
from tests.support.records import sample_serving


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


def _main_table(html: str) -> tuple[list[str], list[list[tuple[str, str | None]]]]:
    """The first view's text-generation table: its header labels and each row's (cell text, title)."""
    import re
    from html import unescape

    table = html[html.index('<table id="catalog"') :]
    table = table[: table.index("</table>")]
    headers = [unescape(re.sub(r"<[^>]+>", "", h)) for h in re.findall(r"<th(?:\s[^>]*)?>(.*?)</th>", table)]
    rows = []
    for row in re.findall(r"<tr[^>]*data-i[^>]*>(.*?)</tr>", table, re.S):
        cells = re.findall(r"<td(\s[^>]*)?>(.*?)</td>", row, re.S)
        rows.append(
            [
                (
                    unescape(re.sub(r"<[^>]+>", "", text)).strip(),
                    (m.group(1) if (m := re.search(r'title="([^"]*)"', attrs or "")) else None),
                )
                for attrs, text in cells
            ]
        )
    return headers, rows


def test_the_main_table_shows_the_sweep_at_the_slo_on_the_rows_own_hardware_only() -> None:
    """Issue 28: the at-SLO columns sit in the text-generation table, filled from the serving record of the row's
    own model on its own hardware (a GPU sweep never fills a Trainium2 row), with where they come from on hover;
    a record's text reaches the title escaped."""
    from pipeline.page import render_page
    from pipeline.records import flatten
    from tests.support.records import sample_record

    served = flatten(sample_record(model_id="trncat-demo/tiny-llama"))
    gpu_only = flatten(sample_record(model_id="acme/gpu-only"))
    trn = sample_serving(device="neuron")
    trn["serving"]["stopped"] = '"><script>window.pwned = 1</script>'
    gpu = sample_serving(device="cuda", model_id="acme/gpu-only")
    html = render_page(latest=[served, gpu_only], rankings=[], exclusions=[], scripts={}, serving=[trn, gpu])
    headers, rows = _main_table(html)
    at, usd = headers.index("Served tok/s per chip at SLO"), headers.index("$ / 1M tokens at SLO")
    (tiny,) = [row for row in rows if row[1][0].startswith("trncat-demo/tiny-llama")]
    (other,) = [row for row in rows if row[1][0].startswith("acme/gpu-only")]
    # the fixture's best point at the SLO: 280 tok/s per chip; $85.964/16 / (280 x 3600) x 1e6 = $5.33
    assert (tiny[at][0], tiny[usd][0]) == ("280", "$5.33")
    assert tiny[at][1] and "guidellm 0.8.1" in tiny[at][1] and "trn2.48xlarge" in tiny[at][1]
    assert (other[at][0], other[usd][0]) == ("\u2014", "\u2014") and other[at][1] is None
    assert "<script>window.pwned" not in html and "&lt;script&gt;window.pwned" in html


def test_a_community_serving_row_never_speaks_as_the_projects_own() -> None:
    """Issue 47.1: a merged community serving record of a model the project measured on the same hardware. It must
    not fill the at-SLO cells of the project's CI row, nor be divided against a CI GPU row, and every entry, pair
    side and hover text says whose it is; the CI serving row ranks first wherever both are."""
    from pipeline.page import render_page
    from pipeline.page.compare import compare_pairs
    from pipeline.page.serving import slo_cells
    from pipeline.records import flatten
    from tests.support.records import as_community, sample_record

    ci_row = flatten(sample_record(model_id="trncat-demo/tiny-llama"))
    community = as_community(sample_serving(device="neuron"))
    # its tok/s per chip inflated alone (x10, with output_tok_s to match): more than its users could receive, refused
    from pipeline.records import validate_record

    inflated = copy.deepcopy(community)
    for point in inflated["serving"]["points"]:
        point["output_tok_s"] *= 10
        point["tok_s_per_chip"] *= 10
    inflated["serving"]["headline"]["tok_s_per_chip"] = inflated["serving"]["points"][-1]["tok_s_per_chip"]
    assert any("could receive" in why for _, why in validate_record(inflated))
    assert validate_record(community) == []
    ci_gpu = sample_serving(device="cuda")
    entries = serving_entries([ci_gpu, community])
    by_device = {e["device"]: e for e in entries}
    assert (by_device["neuron"]["source"], by_device["cuda"]["source"]) == ("community", "ci")
    assert "community" in by_device["neuron"]["badge"]
    (pair,) = serving_pairs(entries)
    assert pair["ratios"] == {"at_slo": "\u2014", "usd": "\u2014"}  # a community side is never divided by a CI one
    assert [s["source"] for s in pair["sides"]] == ["community", "ci"]
    # the CI row's at-SLO cells: never the community sweep's
    assert slo_cells([community]).get(("trncat-demo/tiny-llama", "trn2.48xlarge", "ci")) is None
    html = render_page(latest=[ci_row], rankings=[], exclusions=[], scripts={}, serving=[community, ci_gpu])
    headers, rows = _main_table(html)
    at = headers.index("Served tok/s per chip at SLO")
    (tiny,) = [row for row in rows if row[1][0].startswith("trncat-demo/tiny-llama")]
    assert tiny[at] == ("\u2014", None)
    curve = str(serving_curve("trncat-demo/tiny-llama", entries))
    assert "community" in curve
    # with a CI Trainium2 sweep too, it is the one paired and it fills the CI row
    ci_trn = sample_serving(device="neuron")
    (pair,) = serving_pairs(serving_entries([community, ci_gpu, ci_trn]))
    assert [s["source"] for s in pair["sides"]] == ["ci", "ci"] and pair["ratios"]["at_slo"] == "\u00d70.67"
    assert slo_cells([ci_trn, community])[("trncat-demo/tiny-llama", "trn2.48xlarge", "ci")]["slo"] == 280.0
    # the batch-1 Compare view: a community Trainium2 row beside a CI GPU row carries its source, and no ratio
    trn_row = flatten(as_community(sample_record(model_id="acme/m")))
    gpu_record = sample_record(model_id="acme/m", device="cuda")
    gpu_record["hardware"] = {**gpu_record["hardware"], "name": "nvidia-l40s", "instance_type": "g6e.xlarge",
                              "accelerator": "NVIDIA L40S", "core_config": None, "memory_per_core_bytes": None,
                              "cores_available": 1}  # fmt: skip
    (pair,) = compare_pairs([trn_row, flatten(gpu_record)])
    assert [s["source"] for s in pair["sides"]] == ["community", "ci"]
    assert set(pair["ratios"].values()) == {"\u2014"}
