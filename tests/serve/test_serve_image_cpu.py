"""The image serving path for real: guidellm (its own synthetic images) against the real ``transformers serve`` on
the CPU, the tiny Llava, concurrency 1 and 2: a valid image-text-to-text serving record whose workload says what was
sent, and guidellm's own report shows every request carried the image as an ``image_url`` content part of a chat
completion, which the engine counted as prompt tokens (the tiny Llava's 32 x 32 crop: 16 image tokens)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.records import validate_record
from pipeline.serve import ServeOptions, serve_folder, serving_workload
from tests.serve.conftest import engines_left

# one engine start, one guidellm run over two points (24 requests of 8 tokens), one warm restart: ~40 s on 2 cores
pytestmark = [pytest.mark.slow, pytest.mark.e2e]

#: The tiny Llava's image tokens: its CLIP crop (32 x 32) in patches of 8, the CLS token left out ("default").
IMAGE_TOKENS = (32 // 8) ** 2


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path, Path]:
    from pipeline.testing import build_tiny_llava

    folder = tmp_path_factory.mktemp("serve-image")
    model = build_tiny_llava(folder / "tiny-llava")
    work = folder / "work"
    record = serve_folder(
        model,
        model_id="trncat-demo/tiny-llava",
        revision="0" * 40,
        options=ServeOptions(
            device="cpu",
            workload=serving_workload("cpu-tiny-image"),
            out=folder / "serving.json",
            work=work,
        ),
    )
    return record, work, model


def test_the_image_record_is_valid_and_says_what_was_sent(served: tuple[dict[str, Any], Path, Path]) -> None:
    record, work, _ = served
    assert validate_record(record) == [], record.get("notes")
    assert (record["schema_version"], record["task"], record["status"]) == ("2.0", "image-text-to-text", "pass"), (
        record["failure"]
    )
    serving = record["serving"]
    images = serving["workload"]["images"]
    assert images == {"per_request": 1, "width": 64, "height": 48, "format": "jpeg", "content": "gradient",
                      "dataset": "guidellm synthetic_image"}  # fmt: skip
    engine = serving["engine"]
    # transformers serve batches text-only models only: the Llava runs without continuous batching, and says so
    assert "--continuous-batching" not in engine["command"] and engine["options"]["continuous_batching"] is False
    assert "sequential" in engine["options"]["continuous_batching_off"]
    assert engine["ready_s"] > 0 and engine["warm_ready_s"] > 0
    assert [p["concurrency"] for p in serving["points"]] == [1, 2]
    for point in serving["points"]:
        assert point["success_rate"] == 1.0 and point["output_tok_s"] > 0
        assert 0 < point["ttft_s"]["p50"] <= point["ttft_s"]["p99"]
    assert (work / "serving.serve.sh").is_file()
    assert '"kind": "synthetic_image"' in (work / "serving.serve.sh").read_text(encoding="utf-8")


def test_every_request_carried_its_image_and_the_engine_counted_it(served: tuple[dict[str, Any], Path, Path]) -> None:
    """guidellm's report keeps each request's body: one user message, a text part and one image_url part holding a
    64 x 48 JPEG; the engine's usage counts exactly the image's 16 tokens on top of the templated text's."""
    from transformers import AutoTokenizer

    record, work, model = served
    tokenizer = AutoTokenizer.from_pretrained(model)
    reports = [json.loads(path.read_text(encoding="utf-8")) for path in sorted(work.glob("report-*.json"))]
    assert len(reports) == len(record["serving"]["points"])  # a guidellm run, and its report, per point
    requests = [r for report in reports for b in report["benchmarks"] for r in b["requests"]["successful"]]
    assert len(requests) >= 3  # at least one measured request per stream at each point
    for request in requests:
        body = json.loads(request["request_args"])["body"]
        assert body["generation_config"] and body["max_completion_tokens"] == 8
        (message,) = body["messages"]
        kinds = [part["type"] for part in message["content"]]
        assert sorted(kinds) == ["image_url", "text"], kinds
        url = next(p["image_url"]["url"] for p in message["content"] if p["type"] == "image_url")
        prefix, data = url.split(",", 1)
        assert prefix == "data:image/jpeg;base64"
        jpeg = base64.b64decode(data)
        assert jpeg[:2] == b"\xff\xd8"  # a JPEG
        assert request["input_metrics"]["image_pixels"] == 64 * 48
        assert request["output_tokens"] == 8  # min_new_tokens = max_new_tokens: EOS cannot end it early
        # the engine's prompt tokens: the text guidellm made, in the model's chat template, plus the image's tokens
        text = next(p["text"] for p in message["content"] if p["type"] == "text")
        chat = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                             tokenize=False)  # fmt: skip
        assert request["prompt_tokens"] == len(tokenizer(chat).input_ids) + IMAGE_TOKENS


def test_no_engine_process_is_left_behind(served: tuple[dict[str, Any], Path, Path]) -> None:
    record, _, _ = served
    assert engines_left(record) == []
