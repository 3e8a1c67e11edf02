"""The generation tasks (text-generation, image-text-to-text): ``generate()`` of a fixed number of tokens.

Measured: the latency of a whole ``generate()`` call, the time to the first generated token, decode tokens/s
and the fraction of the memory-bandwidth bound it reaches. The answer checked is every generated step's logits and
the greedy tokens (:mod:`pipeline.bench.agreement`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from pipeline.bench.tasks.base import PROMPT_TEXT, Measured, Run, TaskRunner, percentile, quantiles
from pipeline.workload import Workload


def _first_token_streamer(backend: Any, clock: Callable[[], float] = time.perf_counter) -> Any:
    from transformers.generation.streamers import BaseStreamer

    class FirstTokenTimer(BaseStreamer):
        """Notes the time the first generated token arrives (the first put() is the prompt)."""

        def __init__(self) -> None:
            self.calls = 0
            self.first_token_at: float | None = None

        def put(self, value: Any) -> None:
            self.calls += 1
            if self.calls == 2:
                backend.synchronize()
                self.first_token_at = clock()

        def end(self) -> None:
            pass

    return FirstTokenTimer()


def kv_bytes_per_token(config: Any, *, element_size: int) -> int:
    """Bytes of KV cache one token adds across all layers: ``2 x layers x kv_heads x head_dim x element``.

    Args:
        config: The model's config (a VLM's text config is used when it has one).
        element_size: Bytes per cache element (the weights' dtype).

    Returns:
        Bytes, 0 when the config does not describe standard attention.
    """
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    layers = getattr(text, "num_hidden_layers", None)
    heads = getattr(text, "num_attention_heads", None)
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    hidden = getattr(text, "hidden_size", None)
    head_dim = getattr(text, "head_dim", None) or (hidden // heads if hidden and heads else None)
    if not (layers and kv_heads and head_dim):
        return 0
    return 2 * int(layers) * int(kv_heads) * int(head_dim) * element_size


def decode_bytes_per_step(*, weights_bytes: int, kv_bytes_per_token: int, workload: Any) -> int:
    """Bytes one decode step reads: every weight once, plus each sequence's KV cache at its mean length.

    Args:
        weights_bytes: Bytes of parameters and buffers.
        kv_bytes_per_token: From :func:`kv_bytes_per_token`.
        workload: The fixed workload (batch, input and output tokens).

    Returns:
        Bytes per step (one step yields ``batch_size`` tokens).
    """
    mean_context = workload.input_tokens + workload.output_tokens / 2
    return int(weights_bytes + workload.batch_size * mean_context * kv_bytes_per_token)


def roofline_fraction(
    *, tokens_per_s: float | None, bandwidth: float | None, bytes_per_step: int, batch_size: int
) -> float | None:
    """Measured decode tokens/s over the memory-bandwidth bound ``bandwidth / bytes_per_step x batch``."""
    if not tokens_per_s or not bandwidth or bytes_per_step <= 0:
        return None
    return tokens_per_s / (bandwidth / bytes_per_step * batch_size)


def timed_generate(
    model: Any,
    inputs: dict[str, Any],
    kwargs: dict[str, Any],
    *,
    backend: Any,
    iterations: int,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[list[float], list[float], Any]:
    """The timed loop: ``iterations`` synchronized ``generate()`` calls, each with its time to first token.

    Args:
        model: The prepared model.
        inputs: Model inputs on the device.
        kwargs: ``generate()`` arguments of the workload.
        backend: Synchronizes the device.
        iterations: Timed calls.
        clock: Wall clock by default (benchmarks/harness_overhead.py also uses CPU time).

    Returns:
        ``(latencies_s, ttfts_s, last_output)``.
    """
    latencies: list[float] = []
    ttfts: list[float] = []
    output = None
    for _ in range(iterations):
        streamer = _first_token_streamer(backend, clock)
        start = clock()
        output = model.generate(**inputs, streamer=streamer, **kwargs)
        backend.synchronize()
        end = clock()
        latencies.append(end - start)
        ttfts.append((streamer.first_token_at or end) - start)
    return latencies, ttfts, output


class GenerationTask(TaskRunner):
    """A transformers model that generates text: ``generate()`` of exactly ``output_tokens`` greedy tokens."""

    # A vision-language prompt carries raw image inputs, which transformers' chunked prefill cannot split: its
    # prompt runs eagerly, and the record says so (prefill_mode).
    prefill: ClassVar[str | None] = "eager"

    def prompt_ids(self, tokenizer: Any, n_tokens: int) -> list[int]:
        """Exactly ``n_tokens`` token ids cut from :data:`PROMPT_TEXT` repeated."""
        ids: list[int] = []
        text = PROMPT_TEXT
        while len(ids) < n_tokens:
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            text += PROMPT_TEXT
        return ids[:n_tokens]

    def make_inputs(self, processor: Any, workload: Workload) -> dict[str, Any]:
        """Tensors for one call on the fixed workload (on the CPU; :meth:`setup` moves them to the device)."""
        raise NotImplementedError

    def generate_kwargs(self, processor: Any, workload: Workload) -> dict[str, Any]:
        """Greedy decoding of exactly ``output_tokens`` tokens (end-of-sequence ignored)."""
        tokenizer = getattr(processor, "tokenizer", processor)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        return {
            "max_new_tokens": workload.output_tokens,
            "min_new_tokens": workload.output_tokens,
            "do_sample": False,
            "pad_token_id": pad,
        }

    def setup(self, run: Run) -> None:
        device = run.backend.device()
        made = self.make_inputs(run.processor, run.spec.workload)
        run.state["inputs"] = {k: v.to(device) for k, v in made.items()}
        run.state["kwargs"] = self.generate_kwargs(run.processor, run.spec.workload)

    def call(self, run: Run) -> None:
        run.model.generate(**run.state["inputs"], **run.state["kwargs"])

    def measure(self, run: Run) -> Measured:
        import torch

        spec, inputs = run.spec, run.state["inputs"]
        latencies, ttfts, output = timed_generate(
            run.model, inputs, run.state["kwargs"], backend=run.backend, iterations=spec.iterations, clock=run.clock
        )
        generated = int(output.shape[-1] - inputs["input_ids"].shape[-1])
        if generated != spec.workload.output_tokens:
            raise RuntimeError(f"generated {generated} tokens instead of {spec.workload.output_tokens}")
        latency, ttft = quantiles(latencies), percentile(ttfts, 50)
        p50 = latency["p50"]
        decode_tokens = spec.workload.batch_size * (spec.workload.output_tokens - 1)
        decode_s = p50 - ttft
        tokens_per_s = decode_tokens / decode_s if decode_tokens > 0 and decode_s > 0 else None
        element_size = torch.empty((), dtype=getattr(torch, spec.dtype)).element_size()
        bytes_per_step = decode_bytes_per_step(
            weights_bytes=run.weights_bytes,
            kv_bytes_per_token=kv_bytes_per_token(run.model.config, element_size=element_size),
            workload=spec.workload,
        )
        bandwidth = run.backend.bandwidth_bytes_per_s(cores=spec.cores) if run.primary else None
        fraction = roofline_fraction(
            tokens_per_s=tokens_per_s,
            bandwidth=bandwidth,
            bytes_per_step=bytes_per_step,
            batch_size=spec.workload.batch_size,
        )
        return Measured(
            metrics={
                "ttft_s": ttft,
                "latency_s": latency,
                "decode_tokens_per_s": tokens_per_s,
                "roofline_fraction": fraction,
                "latencies_s": latencies,
            },
            steady_s=p50,
            extra={"bytes_per_decode_step": bytes_per_step, "bandwidth_bytes_per_s": bandwidth, "ttfts_s": ttfts},
        )

    def capture(self, run: Run, path: Path, *, perturb: bool = False) -> None:
        """Save the logits of every generated step (float32) and the greedy tokens of one ``generate()``
        (``torch.save``: ``{"logits": [steps, batch, vocab], "tokens": [batch, steps], "teacher_forced": bool}``).

        With ``spec.teacher`` (a reference capture) the reference's greedy tokens are forced at every step
        (:func:`force_tokens`): the same compiled ``generate()``, each step fed the reference's token before it (the
        CPU noise run of a text prompt makes one forward over the prompt and those tokens instead).
        """
        import torch

        from pipeline.bench.tasks.perturb import lose_weight, perturb_logits

        fault = run.spec.fault if perturb else None
        if fault == "perturb-weight":
            lose_weight(run.model)
        inputs, kwargs = run.state["inputs"], dict(run.state["kwargs"])
        prompt = inputs["input_ids"].shape[-1]
        teacher = run.spec.teacher
        if teacher:
            forced = torch.load(teacher, weights_only=True)["tokens"].to(inputs["input_ids"].device)
            kwargs["logits_processor"] = force_tokens(forced, prompt=prompt)
        if teacher and run.spec.phase == "reference" and set(inputs) <= {"input_ids", "attention_mask"}:
            # The CPU noise run of a text prompt: one forward over the prompt and the forced tokens gives every
            # step's teacher-forced logits at once (a prefill, not one decode per token: a few times cheaper).
            ids = torch.cat([inputs["input_ids"], forced[:, :-1]], dim=-1)
            out_logits = run.model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
            logits = out_logits[:, prompt - 1 :].detach().float().cpu().transpose(0, 1).contiguous()
            tokens = forced.detach().cpu()
        else:
            out = run.model.generate(**inputs, **kwargs, output_logits=True, return_dict_in_generate=True)
            logits = torch.stack([step.detach().float().cpu() for step in out.logits])
            tokens = out.sequences[:, prompt:].detach().cpu()
        if fault is not None:
            logits = perturb_logits(logits, fault)
        torch.save({"logits": logits, "tokens": tokens, "teacher_forced": bool(teacher)}, path)


def force_tokens(tokens: Any, *, prompt: int) -> Any:
    """A logits processor list that makes ``generate()`` pick ``tokens[:, step]`` at each step (teacher forcing).

    ``output_logits`` keeps the raw logits, before any processor: those are what the check compares. The forced
    scores are made on the scores' own device (a fill and a scatter), so the compiled forward is untouched.
    """
    from transformers import LogitsProcessor, LogitsProcessorList

    class ForceTokens(LogitsProcessor):
        def __call__(self, input_ids: Any, scores: Any) -> Any:
            step = min(input_ids.shape[-1] - prompt, tokens.shape[-1] - 1)
            forced = scores.new_full(scores.shape, float("-inf"))
            return forced.scatter(-1, tokens[:, step : step + 1], 0.0)

    return LogitsProcessorList([ForceTokens()])
