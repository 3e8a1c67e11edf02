"""The image serving workload: its contract, the scenario guidellm reads (its own synthetic images beside the
random prompts, sent to the chat completions endpoint), the engines' commands for it, and the record's checks of
what the workload says was sent (a hostile entry is refused)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.errors import ConfigError
from pipeline.records import validate_record
from pipeline.serve import (
    ServingWorkload,
    engine_for,
    image_workload,
    scenario,
    serve_script,
    serving_workload,
    transformers_serve,
    vllm_serve,
)
from tests.support.records import sample_serving


def test_the_image_workload_is_the_text_contract_plus_one_fixed_image() -> None:
    text, image = serving_workload("1k/1k"), serving_workload("1k/1k-image")
    assert image_workload("1k/1k") == image and image_workload("8k/1k") is None
    same = ("input_tokens", "output_tokens", "range_ratio", "concurrencies", "measured_per_stream", "warmup_per_stream")
    assert all(getattr(text, f) == getattr(image, f) for f in same)
    assert (image.images_per_request, image.image_width, image.image_height) == (1, 1280, 720)
    assert (image.task, text.task) == ("image-text-to-text", "text-generation")
    record = image.to_record()
    assert record["images"] == {"per_request": 1, "width": 1280, "height": 720, "format": "jpeg",
                                "content": "gradient", "dataset": "guidellm synthetic_image"}  # fmt: skip
    assert "images" not in text.to_record() and "images_per_request" not in record
    assert ServingWorkload.from_record(record) == image and ServingWorkload.from_record(text.to_record()) == text
    # one token per 14 x 14 patch: 92 x 52 for a 1280 x 720 image
    assert image.image_tokens_bound == 92 * 52 and text.image_tokens_bound == 0


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"images_per_request": 2, "image_width": 64, "image_height": 64}, "turns of a conversation"),
        ({"images_per_request": 1, "image_width": 63, "image_height": 64}, "even"),
        ({"images_per_request": 1, "image_width": 0, "image_height": 64}, "even"),
        ({"images_per_request": 1, "image_width": 10_000, "image_height": 64}, "8192"),
        ({"images_per_request": -1}, "non-negative"),
        ({"images_per_request": True, "image_width": 64, "image_height": 64}, "non-negative"),
        ({"image_width": 64, "image_height": 64}, "without images_per_request"),
    ],
)
def test_a_bad_image_workload_says_why(fields: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        ServingWorkload(name="bad", input_tokens=8, output_tokens=8, **fields)


@pytest.mark.parametrize("engine", ["transformers-serve", "vllm-neuron"])
def test_guidellm_reads_the_image_scenario_and_makes_the_images_asked_for(engine: str) -> None:
    schema = pytest.importorskip("guidellm.schemas.benchmark.entrypoints")
    from guidellm.schemas.data import SyntheticImageDataArgs

    workload = serving_workload("1k/1k-image")
    spec = (
        transformers_serve(Path("/m"), port=1, continuous_batching=False)
        if engine == "transformers-serve"
        else vllm_serve(Path("/m"), port=8000, neuron=True, tensor_parallel=4, lnc=2, images_per_prompt=1)
    )
    doc = scenario(spec, workload, [1, 2], tokenizer=Path("/m"), report=Path("/r.json"))
    benchmarks = schema.BenchmarkScenario.model_validate(doc).get_benchmarks()
    assert [b.profile.streams for b in benchmarks] == [[1], [2]]
    assert doc["spec"]["backend"]["request_format"] == "/v1/chat/completions"
    text, images = doc["spec"]["data"]
    assert text["kind"] == "synthetic_text" and text["prompt_tokens"] == 1024
    args = SyntheticImageDataArgs.model_validate(images)  # guidellm's own reading of it: the size is kept as given
    assert (args.width, args.height, args.images_per_request, args.format) == (1280, 720, 1, "jpeg")
    assert args.seed == workload.seed
    # ignore-EOS as for text: vLLM's through guidellm's output_tokens, transformers serve's own generation config
    if engine == "transformers-serve":
        body = doc["spec"]["backend"]["extras"]["body"]
        assert json.loads(body["generation_config"])["min_new_tokens"] == 1024 and "output_tokens" not in text
    else:
        assert text["output_tokens"] == 1024


def test_guidellm_makes_one_jpeg_of_the_size_per_row() -> None:
    """guidellm's synthetic_image deserializer, run here on the scenario's own entry: each row is one image of the
    workload's size (the data the chat request's image_url part is made from)."""
    pytest.importorskip("guidellm")
    from guidellm.data.deserializers import SyntheticImageDataset
    from guidellm.schemas.data import SyntheticImageDataArgs

    spec = transformers_serve(Path("/m"), port=1)
    doc = scenario(spec, serving_workload("cpu-tiny-image"), [1], tokenizer=Path("/m"), report=Path("/r"))
    config = SyntheticImageDataArgs.model_validate(doc["spec"]["data"][1])
    rows = iter(SyntheticImageDataset(config, random_seed=0))
    for _ in range(2):
        row = next(rows)
        assert set(row) == {"image"}  # one image, the column guidellm's mapper sends as the request's image
        assert row["image"]["image_pixels"] == 64 * 48 and row["image"]["image"].startswith("data:image/jpeg;base64,")


def test_the_engines_get_what_image_serving_needs(tmp_path: Path) -> None:
    cpu = engine_for("cpu", tmp_path, port=1, chips=1, dtype="float32", lnc=None, max_model_len=64,
                     images_per_prompt=1)  # fmt: skip
    assert "--continuous-batching" not in cpu.argv and "--cb-num-blocks" not in cpu.argv
    assert cpu.options["continuous_batching"] is False and "sequential" in cpu.options["continuous_batching_off"]
    # a text model vLLM cannot serve on the CPU (head_dim 16): transformers serve, with continuous batching
    (tmp_path / "config.json").write_text('{"hidden_size": 64, "num_attention_heads": 4}', encoding="utf-8")
    text = engine_for("cpu", tmp_path, port=1, chips=1, dtype="float32", lnc=None, max_model_len=64)
    assert "--continuous-batching" in text.argv and "continuous_batching_off" not in text.options
    for device in ("cuda", "neuron"):
        spec = engine_for(device, tmp_path, port=1, chips=1, dtype="bfloat16", lnc=2, max_model_len=4096,
                          images_per_prompt=1)  # fmt: skip
        at = spec.argv.index("--limit-mm-per-prompt")
        assert json.loads(spec.argv[at + 1]) == {"image": 1} and spec.options["limit_mm_per_prompt_image"] == 1
        plain = engine_for(device, tmp_path, port=1, chips=1, dtype="bfloat16", lnc=2, max_model_len=4096)
        assert "--limit-mm-per-prompt" not in plain.argv


def test_vllm_neuron_holds_each_chip_s_cores_at_its_logical_core_config(tmp_path: Path) -> None:
    # pipeline.hardware's Trainium2 figures: 4 logical cores a chip at LNC=2 (the default), 8 at LNC=1.
    for lnc, tensor_parallel in ((None, 8), (2, 8), (1, 16)):
        spec = engine_for("neuron", tmp_path, port=1, chips=2, dtype="bfloat16", lnc=lnc, max_model_len=64)
        assert spec.options["tensor_parallel"] == tensor_parallel and spec.options["lnc"] == (lnc or 2)


def image_record() -> dict[str, Any]:
    record = sample_serving(device="neuron", task="image-text-to-text")
    record["serving"]["workload"] = serving_workload("1k/1k-image").to_record()
    record["serving"]["engine"]["command"] = shlex_join_vllm()
    record["serving"]["engine"]["options"] = vllm_serve(
        Path("/data/m"), port=8000, neuron=True, tensor_parallel=4, lnc=2, images_per_prompt=1
    ).options
    return record


def shlex_join_vllm() -> str:
    return vllm_serve(Path("/data/m"), port=8000, neuron=True, tensor_parallel=4, lnc=2, images_per_prompt=1).shell()


def test_an_image_serving_record_validates_and_serve_sh_reproduces_its_images() -> None:
    record = image_record()
    assert validate_record(record, allow_emulated=True) == []
    text = serve_script(record)
    assert """--limit-mm-per-prompt '{"image": 1}'""" in text
    assert '"kind": "synthetic_image"' in text and '"width": 1280' in text and "/v1/chat/completions" in text


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda r: r["serving"]["workload"]["images"].update(per_request=10**9), "per_request"),
        (lambda r: r["serving"]["workload"]["images"].update(width=-64), "width"),
        (lambda r: r["serving"]["workload"]["images"].update(format="svg+xml"), "format"),
        (lambda r: r["serving"]["workload"]["images"].update(url="http://evil.example/x.png"), "url"),
        (lambda r: r["serving"]["workload"].update(images="<img src=x onerror=alert(1)>"), "images"),
        (lambda r: r.update(task="text-generation"), "images"),
    ],
)
def test_a_hostile_or_inconsistent_image_workload_is_refused(change: Any, field: str) -> None:
    record = copy.deepcopy(image_record())
    change(record)
    problems = validate_record(record, allow_emulated=True)
    assert problems and any(field in f"{f} {m}" for f, m in problems), problems


def test_an_image_text_to_text_serving_record_without_images_is_refused() -> None:
    record = sample_serving(device="neuron", task="image-text-to-text")
    problems = validate_record(record, allow_emulated=True)
    assert ("serving.workload.images", "a image-text-to-text serving record with images False") in problems
