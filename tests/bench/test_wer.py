"""Word error rate and the graded transcript check (automatic-speech-recognition), without a model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pipeline.bench import agreement
from pipeline.bench.grading import grade_transcripts
from pipeline.bench.wer import edit_distance, normalise, word_error_rate

ASR = "automatic-speech-recognition"


def test_normalise_keeps_words_and_apostrophes_only() -> None:
    assert normalise("The Fox, it's QUICK!  ok") == ["the", "fox", "it's", "quick", "ok"]
    assert normalise("") == [] and normalise("…—") == []


@pytest.mark.parametrize(
    ("ref", "hyp", "distance"),
    [
        ("a b c", "a b c", 0),
        ("a b c", "a x c", 1),  # a substitution
        ("a b c", "a c", 1),  # a deletion
        ("a b c", "a b b c", 1),  # an insertion
        ("a b c", "", 3),
        ("", "a b", 2),
        ("kitten sitting on", "sitting kitten on", 2),
    ],
)
def test_edit_distance_counts_substitutions_deletions_and_insertions(ref: str, hyp: str, distance: int) -> None:
    assert edit_distance(ref.split(), hyp.split()) == distance


def test_the_corpus_wer_sums_edits_over_the_clips_before_dividing() -> None:
    # 1 edit over 2 words and 0 over 8: 1/10, not the mean of the clips' rates (0.25)
    assert word_error_rate(["a b", "c d e f g h i j"], ["a x", "c d e f g h i j"]) == pytest.approx(0.1)
    assert word_error_rate(["The cat sat."], ["the cat sat"]) == 0.0
    assert word_error_rate(["a"], ["x y z"]) == 3.0  # more words than the reference, all wrong: above 1
    assert word_error_rate([""], [""]) == 0.0 and word_error_rate([""], ["a"]) == 1.0
    with pytest.raises(ValueError, match="1 transcript"):
        word_error_rate(["a", "b"], ["a"])


def test_grades_follow_the_word_error_rate_and_the_bfloat16_run() -> None:
    ref = ["one two three four five six seven eight nine ten"] * 6  # 60 words
    assert grade_transcripts(ref, ref, None, threshold=0.02)["grade"] == "exact"
    one_word = [ref[0].replace("five", "fife"), *ref[1:]]  # 1/60 < 0.02
    assert grade_transcripts(ref, one_word, None, threshold=0.02)["grade"] == "within tolerance"
    worse = [r.replace("five", "fife") for r in ref]  # 6/60 = 0.1
    graded = grade_transcripts(ref, worse, None, threshold=0.02)
    assert graded["grade"] == "diverges" and graded["transcript_wer"] == pytest.approx(0.1)
    # bfloat16 alone changes as many words on the CPU: noise, not a wrong answer
    noise = [r.replace("six", "sex") for r in ref]
    rescued = grade_transcripts(ref, worse, noise, threshold=0.02)
    assert rescued["grade"] == "bfloat16 noise" and rescued["noise_wer"] == pytest.approx(0.1)
    assert grade_transcripts(ref, worse, ref, threshold=0.02)["grade"] == "diverges"


def _capture(path: Path, transcripts: list[str]) -> Path:
    torch.save({"transcripts": transcripts}, path)
    return path


def test_compare_grades_saved_transcripts_and_says_where_they_differ(tmp_path: Path) -> None:
    reference = _capture(tmp_path / "ref.pt", ["the quick brown fox", "jumps over the lazy dog"])
    same = agreement.compare(_capture(tmp_path / "same.pt", ["The quick brown fox.", "jumps over the lazy dog"]),
                             reference, task=ASR, noise_skipped="the run is float32")  # fmt: skip
    assert same["grade"] == "exact" and same["transcript_wer"] == 0.0 and same["threshold"] == 0.02
    assert same["reference"] == "cpu-float32" and "noise_wer" not in same  # no bfloat16 run: no figure
    wrong = agreement.compare(_capture(tmp_path / "wrong.pt", ["the quick brown cat", "jumps under a lazy dog"]),
                              reference, task=ASR, noise_skipped="the run is float32")  # fmt: skip
    assert wrong["grade"] == "diverges" and wrong["transcript_wer"] == pytest.approx(3 / 9, abs=1e-6)
    assert agreement.disagrees(wrong)
    message = agreement.failure_message(wrong, task=ASR)
    assert "word error rate 0.3333 against the CPU float32 reference's transcripts, above 0.02" in message
    assert "cosine" not in message


def test_a_device_capture_with_a_clip_missing_is_an_error_not_a_pass(tmp_path: Path) -> None:
    reference = _capture(tmp_path / "ref.pt", ["a", "b"])
    with pytest.raises(ValueError, match="1 transcript"):
        agreement.compare(_capture(tmp_path / "short.pt", ["a"]), reference, task=ASR)
