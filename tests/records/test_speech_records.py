"""Schema 1.5's automatic-speech-recognition record: valid with its own fields, none of another task's, its flat
row and back, its cost per hour of audio."""

from __future__ import annotations

import copy

import pytest

from pipeline.prices import load_pricing, row_costs
from pipeline.records import flatten, unflatten, validate_record
from tests.support.records import sample_failure, sample_record, sample_speech_record

ASR = "automatic-speech-recognition"


def test_a_speech_record_is_valid_and_its_row_gives_it_back() -> None:
    record = sample_speech_record()
    assert validate_record(record) == []
    row = flatten(record)
    assert (row["real_time_factor"], row["wer"], row["audio_clips"]) == (0.19, 0.054, 4)
    assert row["agreement_transcript_wer"] == 0.0 and row["agreement_noise_wer"] == 0.0179
    assert unflatten(row) == record


def test_a_speech_failure_without_a_bfloat16_run_round_trips() -> None:
    record = sample_failure(task=ASR, workload=sample_speech_record()["workload"])
    record["metrics"].update(real_time_factor=None, audio_seconds=None, wer=None)
    record["agreement"] = None
    assert validate_record(record) == []
    assert unflatten(flatten(record)) == record


def _problems(record: dict) -> str:
    return " | ".join(f"{field}: {problem}" for field, problem in validate_record(record))


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda r: r["workload"].pop("audio_clips"), "audio_clips"),
        (lambda r: r["metrics"].pop("wer"), "wer"),
        (lambda r: r["metrics"].update(real_time_factor=None), "real_time_factor"),  # a pass reports it
        (lambda r: r["metrics"].update(sentences_per_s=12.0), "sentences_per_s"),  # another task's figure
        (lambda r: r["agreement"].update(embedding_cosine=0.99), "embedding_cosine"),
        (lambda r: r["metrics"].update(wer=-0.1), "wer"),
        (lambda r: r["workload"].update(steps=20), "steps"),
    ],
)
def test_a_speech_record_with_a_field_wrong_or_of_another_task_is_refused(change, said: str) -> None:
    record = copy.deepcopy(sample_speech_record())
    change(record)
    problems = _problems(record)
    assert problems and said in problems


def test_another_task_carries_none_of_the_speech_fields() -> None:
    record = sample_record()
    assert validate_record(record) == []
    record["metrics"]["wer"] = 0.1
    assert "wer" in _problems(record)
    embedding = sample_record(workload={"audio_clips": 4})
    assert "audio_clips" in _problems(embedding)


def test_the_cost_per_hour_of_audio_is_the_share_of_the_price_times_the_real_time_factor() -> None:
    row = flatten(sample_speech_record())
    costs = row_costs(row, load_pricing())
    usd, share = costs["price_usd_per_hour"], row["cores"] / 64  # one of trn2.48xlarge's 64 cores at LNC=2
    assert costs["cost_usd_per_audio_hour"] == pytest.approx(usd * share * 0.19)
    assert costs["cost_usd_per_million_tokens"] is None  # the other tasks' cost columns stay null
