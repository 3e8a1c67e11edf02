"""benchmarks/cuda_path.py, the cuda path on a real GPU: its CPU-independent parts (CI has no GPU).

The arguments, the roofline arithmetic, the meta-device build of real configs at their real sizes, the random
weights materialized on a device (here the CPU, on a tiny config), and the clear refusal where no GPU is.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import ROOT

SCRIPT = ROOT / "benchmarks" / "cuda_path.py"


@pytest.fixture(scope="module")
def cuda_path() -> Any:
    spec = importlib.util.spec_from_file_location("cuda_path", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def test_the_arguments_and_their_limits(cuda_path: Any) -> None:
    args = cuda_path.parse_args([])
    assert args.config == ["llama-3.2-1b", "llama-3.1-8b"] and (args.input_tokens, args.output_tokens) == (128, 64)
    assert not args.no_bench_model and args.bandwidth_gbps is None
    args = cuda_path.parse_args(["--config", "qwen2.5-7b-instruct", "--config", "x/config.json", "--no-bench-model"])
    assert args.config == ["qwen2.5-7b-instruct", "x/config.json"] and args.no_bench_model
    assert cuda_path.config_path("llama-3.2-1b") == ROOT / "tests" / "fixtures" / "configs" / "llama-3.2-1b.json"
    assert cuda_path.config_path("x/config.json") == Path("x/config.json")
    for bad in (["--output-tokens", "1"], ["--rounds", "0"], ["--iterations", "0"]):
        with pytest.raises(SystemExit) as refused:
            cuda_path.parse_args(bad)
        assert refused.value.code == 2, bad


def test_the_roofline_and_decode_arithmetic(cuda_path: Any) -> None:
    # An H200 (4.8 TB/s) reading 2.4 GB per step decodes at most 2000 tokens/s at batch 1, 4000 at batch 2.
    assert cuda_path.roofline_tokens_per_s(bandwidth_bytes_per_s=4.8e12, bytes_per_step=2_400_000_000,
                                           batch_size=1) == pytest.approx(2000.0)  # fmt: skip
    assert cuda_path.roofline_tokens_per_s(bandwidth_bytes_per_s=4.8e12, bytes_per_step=2_400_000_000,
                                           batch_size=2) == pytest.approx(4000.0)  # fmt: skip
    with pytest.raises(ValueError):
        cuda_path.roofline_tokens_per_s(bandwidth_bytes_per_s=0.0, bytes_per_step=1, batch_size=1)
    # 63 tokens after the first in 0.9 s - 0.2 s = 90 tok/s; the harness's own formula.
    assert cuda_path.decode_tokens_per_s(batch_size=1, output_tokens=64, latency_s=0.9, first_token_s=0.2) == 90.0
    assert cuda_path.decode_tokens_per_s(batch_size=1, output_tokens=64, latency_s=0.2, first_token_s=0.2) is None
    assert cuda_path.relative(103.0, 100.0) == pytest.approx(0.03) and cuda_path.relative(None, 1.0) is None
    # The bound uses the bytes the harness's roofline counts: weights once plus the KV cache at its mean length.
    from pipeline.bench.tasks.generation import decode_bytes_per_step
    from pipeline.workload import Workload

    step = decode_bytes_per_step(weights_bytes=2_000, kv_bytes_per_token=10,
                                 workload=Workload(batch_size=1, input_tokens=128, output_tokens=64))  # fmt: skip
    assert step == 2_000 + (128 + 32) * 10


@pytest.mark.parametrize(
    ("name", "params"),
    [("llama-3.2-1b", 1_235_814_400), ("llama-3.1-8b", 8_030_261_248)],  # Meta's published sizes
)
def test_a_real_config_builds_on_the_meta_device_at_its_real_size(cuda_path: Any, name: str, params: int) -> None:
    import torch

    model = cuda_path.build_on_meta(cuda_path.load_config(cuda_path.config_path(name)), dtype=torch.bfloat16)
    assert all(p.device.type == "meta" for p in model.parameters())  # no storage: nothing allocated
    assert cuda_path.param_count(model) == params
    assert cuda_path.weights_bytes(model) >= 2 * params and cuda_path.weights_bytes(model) < 2 * params + 4096


def test_random_weights_are_materialized_with_working_rotary_tables(cuda_path: Any) -> None:
    import torch
    from transformers import LlamaConfig

    from pipeline.bench.tasks import get_task
    from pipeline.testing.tiny import build_tokenizer
    from pipeline.workload import Workload

    config = LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         tie_word_embeddings=True)  # fmt: skip
    model = cuda_path.materialize(cuda_path.build_on_meta(config, dtype=torch.bfloat16), device=torch.device("cpu"),
                                  seed=0)  # fmt: skip
    assert not any(p.device.type == "meta" for p in model.parameters())
    assert model.lm_head.weight is model.model.embed_tokens.weight  # the tie survives
    assert torch.equal(model.model.norm.weight, torch.ones_like(model.model.norm.weight))
    weights = model.model.layers[0].mlp.up_proj.weight.float()
    assert abs(weights.std().item() - 0.02) < 0.005 and weights.isfinite().all()
    fresh = type(model.model.rotary_emb)(config=config)  # computed, not loaded: built again, in float32
    assert torch.equal(model.model.rotary_emb.inv_freq, fresh.inv_freq)
    task, tokenizer = get_task("text-generation"), build_tokenizer()
    workload = Workload(batch_size=1, input_tokens=16, output_tokens=8)
    output = model.generate(**task.make_inputs(tokenizer, workload), **task.generate_kwargs(tokenizer, workload))
    assert output.shape == (1, 24)  # exactly the workload's tokens, as the harness generates them


def test_without_a_gpu_it_refuses_clearly(cuda_path: Any) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the script would measure it")
    done = subprocess.run([sys.executable, str(SCRIPT), "--config", "llama-3.2-1b"], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert "needs an NVIDIA GPU and a CUDA build of torch" in done.stderr and "nothing was measured" in done.stderr
    missing = subprocess.run([sys.executable, str(SCRIPT), "--config", "no-such-model"], capture_output=True,
                             text=True, timeout=300, cwd=ROOT)  # fmt: skip
    assert missing.returncode == 2 and "no such config: no-such-model" in missing.stderr
