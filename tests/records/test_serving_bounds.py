"""A serving point's figures bounded by what its chips can do (issue 47.1), and the parameters one token reads."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from pipeline.records import validate_record
from pipeline.records.serving_checks import peak_steps_per_s
from tests.support.records import as_community, sample_serving


def _claiming(record: dict, per_user: float) -> dict:
    """``record`` with every point's users served at ``per_user`` tok/s, its totals and headline to match (each figure
    consistent with the others: only the hardware can tell it is impossible)."""
    for point in record["serving"]["points"]:
        point["tok_s_per_user"] = per_user
        point["tpot_ms"] = {"p50": 1000 / per_user, "p90": 1100 / per_user, "p99": 1200 / per_user}
        point["itl_ms"] = dict(point["tpot_ms"])
        point["output_tok_s"] = point["tok_s_per_chip"] = per_user * point["concurrency"]
    record["serving"]["headline"]["tok_s_per_chip"] = record["serving"]["points"][-1]["tok_s_per_chip"]
    return record


@pytest.mark.parametrize("device", ["neuron", "cuda"], ids=["trainium2", "l40s"])  # a test id "neuron" needs a chip
def test_a_community_record_faster_than_its_chips_memory_allows_is_refused(device: str) -> None:
    """The fixture's model has 1,235,814,400 parameters in bfloat16 (2.47 GB a token reads): one Trainium2 chip
    (2.9 TB/s) allows 1,173 decode steps per second, an L40S (864 GB/s) 350. A community sweep whose every figure
    agrees with the others but claims 5,000 tok/s per user is refused, and one at 300 stands."""
    honest = as_community(sample_serving(device=device))
    peak, _ = peak_steps_per_s(honest)
    assert peak == pytest.approx((2.9e12 if device == "neuron" else 864e9) / (1_235_814_400 * 2))
    assert not validate_record(_claiming(as_community(sample_serving(device=device)), 300.0))
    problems = validate_record(_claiming(as_community(sample_serving(device=device)), 5000.0))
    assert problems and all("memory bandwidth allows" in p for _, p in problems)
    assert {f for f, _ in problems} >= {"serving.points.0.tok_s_per_user", "serving.points.3.output_tok_s"}
    # with the parameters one token reads recorded (a mixture of experts reads fewer), the bound is theirs
    moe = _claiming(as_community(sample_serving(device=device)), 5000.0)
    moe["serving"]["active_params"] = 100_000_000
    assert not validate_record(moe)


def test_a_community_record_that_cannot_be_bounded_is_refused_a_ci_one_is_not() -> None:
    """Naming an accelerator without a published bandwidth would dodge the bound (a pass must carry its parameter
    count): a community record must be boundable; the project's own CI record is taken as it is."""
    record = sample_serving(device="neuron")
    record["hardware"] |= {"accelerator": "trainium9", "instance_type": None}
    assert not validate_record(record)
    problems = validate_record(as_community(record))
    assert [f for f, _ in problems] == ["serving.active_params"] and "cannot be bounded" in problems[0][1]
    gpu = as_community(sample_serving(device="cuda"))
    gpu["hardware"]["accelerator"] = "Imaginary GPU"
    assert [f for f, _ in validate_record(gpu)] == ["serving.active_params"]


def _safetensors(path: Path, shapes: dict[str, list[int]]) -> None:
    header = {n: {"dtype": "BF16", "shape": s, "data_offsets": [0, 0]} for n, s in shapes.items()}
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)


def test_the_parameters_one_token_reads(tmp_path: Path) -> None:
    """A dense model reads all of its parameters; a mixture of experts its shared part, its shared expert and top-k
    of its routed experts (Qwen3-MoE's names and config keys)."""
    from pipeline.models import safetensors_param_count

    shapes = {
        "model.embed_tokens.weight": [100, 10],
        "model.layers.0.mlp.shared_experts.up_proj.weight": [10, 10],
        **{f"model.layers.0.mlp.experts.{e}.up_proj.weight": [10, 20] for e in range(8)},
    }
    _safetensors(tmp_path / "model.safetensors", shapes)
    assert safetensors_param_count(tmp_path, active=True) == 1000 + 100 + 8 * 200  # no config: every parameter
    (tmp_path / "config.json").write_text(json.dumps({"num_experts_per_tok": 2, "num_experts": 8}))
    assert safetensors_param_count(tmp_path, active=True) == 1000 + 100 + 2 * 200
    assert safetensors_param_count(tmp_path / "none", active=True) is None
