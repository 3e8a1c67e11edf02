"""The page's Speech recognition tab: its columns from pipeline/page/task_columns.py, its answer check in words."""

from __future__ import annotations

from pipeline import page
from pipeline.page import table_metrics, task_view
from pipeline.prices import load_pricing, row_costs
from pipeline.records import flatten
from tests.support.records import sample_speech_record

ASR = "automatic-speech-recognition"


def test_the_speech_tab_shows_its_own_figures_and_names_its_check() -> None:
    assert [m.label for m in table_metrics(ASR)] == ["RTF", "s / clip", "Tokens/s", "WER", "$ / audio hour"]
    view = task_view(ASR)
    assert view.speed is not None and view.speed.column == "latency_p50_s"
    assert view.cosine == "agreement_transcript_wer" and view.measure == "word error rate"
    assert task_view("text-generation").measure == "cosine"


def test_a_speech_row_renders_in_its_tab_with_its_cost() -> None:
    row = flatten(sample_speech_record())
    row.update(row_costs(row, load_pricing()))
    html = page.render_page(latest=[row], rankings=[], exclusions=[], scripts={})
    assert ">Speech recognition<" in html and ">$ / audio hour</th>" in html
    assert ">0.19<" in html and ">0.054<" in html  # the real-time factor and the WER, as numbers
    assert "acme/whisper-small" in html
    assert "transcripts of the clips against a CPU float32 reference of the same input: word error rate 0." in html
