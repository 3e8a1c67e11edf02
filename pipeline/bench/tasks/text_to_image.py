"""text-to-image: a diffusers pipeline denoises a fixed prompt into one image at the workload's resolution.

Run as its users run it: ``DiffusionPipeline.from_pretrained(folder, dtype=..., trust_remote_code=False)`` then
``.to(device)`` and a call with the prompt. The harness has already refused a ``model_index.json`` naming a class
outside diffusers and transformers (:func:`pipeline.models.gates.check_pipeline_classes`). On a compiling backend
the denoiser (``unet`` or ``transformer``) is compiled in place with ``torch.compile`` over fixed shapes, as the
diffusers docs show for torch.compile; the VAE and text encoders run as they are.

The initial noise comes from a CPU generator with a fixed seed, so every device starts from the same latents
(diffusers draws them on the CPU and moves them). Measured per image (batch 1): the call's latency,
denoising steps/s from the step-end callbacks (the steps after the first: ``(steps - 1) / (last - first)``),
and the VAE decode as the time from the last step's end to the call's end (the decode and the image's
post-processing). The answer checked is the second denoising step's update of the latents (the latents at the
end of step 2 minus those at the end of step 1), against the CPU float32 reference by cosine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from pipeline.bench.tasks.base import Measured, OneCoreTask, Run, percentile, quantiles, save_output

#: The prompt every text-to-image run draws.
PROMPT = "A photograph of a red fox in a snowy forest at dawn, soft light, highly detailed"
#: The seed of the CPU generator the initial noise comes from.
SEED = 0
#: The pipeline components that are the denoiser, in the order looked for.
DENOISERS = ("unet", "transformer")


def denoiser(pipe: Any) -> tuple[str, Any]:
    """The pipeline's denoiser: ``(component name, module)``.

    Raises:
        RuntimeError: the pipeline has neither a UNet nor a transformer.
    """
    for name in DENOISERS:
        module = getattr(pipe, name, None)
        if module is not None:
            return name, module
    raise RuntimeError(f"{type(pipe).__name__} has no denoiser (no {' or '.join(DENOISERS)} component)")


class TextToImage(OneCoreTask):
    library: ClassVar[str] = "diffusers"

    def load_pipeline(self, path: Path, *, dtype: Any) -> Any:
        from diffusers import DiffusionPipeline
        from diffusers.utils import logging as diffusers_logging

        diffusers_logging.disable_progress_bar()
        return DiffusionPipeline.from_pretrained(
            str(path), dtype=dtype, trust_remote_code=False, custom_pipeline=None, local_files_only=True
        )

    def modules(self, model: Any) -> list[Any]:
        import torch

        return [c for c in model.components.values() if isinstance(c, torch.nn.Module)]

    def to_device(self, model: Any, device: Any) -> Any:
        model = model.to(device)
        model.set_progress_bar_config(disable=True)
        return model

    def compiled_part(self, model: Any) -> Any:
        return denoiser(model)[1]

    def setup(self, run: Run) -> None:
        workload = run.spec.workload
        size = workload.image_size or 512
        kwargs: dict[str, Any] = {
            "prompt": [PROMPT] * workload.batch_size,
            "height": size,
            "width": size,
            "num_inference_steps": workload.steps or 20,
        }
        if workload.guidance_scale is not None:
            kwargs["guidance_scale"] = workload.guidance_scale
        run.state["kwargs"] = kwargs

    def _call(self, run: Run, **extra: Any) -> Any:
        import torch

        generator = torch.Generator("cpu").manual_seed(SEED)
        return run.model(**run.state["kwargs"], generator=generator, **extra)

    def call(self, run: Run) -> None:
        self._call(run)

    def measure(self, run: Run) -> Measured:
        backend, clock = run.backend, run.clock
        latencies: list[float] = []
        step_rates: list[float] = []
        decodes: list[float] = []
        for _ in range(run.spec.iterations):
            marks: list[float] = []

            def on_step_end(
                pipe: Any, step: int, timestep: Any, callback_kwargs: dict[str, Any], marks: list[float] = marks
            ) -> dict[str, Any]:
                backend.synchronize()
                marks.append(clock())
                return callback_kwargs

            start = clock()
            self._call(run, callback_on_step_end=on_step_end)
            backend.synchronize()
            end = clock()
            latencies.append(end - start)
            if len(marks) >= 2 and marks[-1] > marks[0]:
                step_rates.append((len(marks) - 1) / (marks[-1] - marks[0]))
            if marks:
                decodes.append(end - marks[-1])
        latency, batch = quantiles(latencies), run.spec.workload.batch_size
        return Measured(
            metrics={
                "latency_s": latency,
                "seconds_per_image": latency["p50"] / batch,
                "steps_per_s": percentile(step_rates, 50) if step_rates else None,
                # each call's decode is part of that call, so its median is within the calls' median
                "vae_decode_s": percentile(decodes, 50) / batch if decodes else None,
                "latencies_s": latencies,
            },
            steady_s=latency["p50"],
        )

    def capture(self, run: Run, path: Path, *, perturb: bool = False) -> None:
        """Save the second denoising step's update of the latents (``torch.save``: ``{"output": [batch, ...]}``).

        The call stops after two steps (diffusers' ``interrupt``) and returns latents, not an image.
        """
        seen: list[Any] = []

        def keep(pipe: Any, step: int, timestep: Any, callback_kwargs: dict[str, Any]) -> dict[str, Any]:
            seen.append(callback_kwargs["latents"].detach().float().cpu().clone())
            if len(seen) >= 2:
                pipe._interrupt = True  # diffusers' own flag: the remaining steps are skipped
            return callback_kwargs

        try:
            self._call(run, callback_on_step_end=keep, output_type="latent")
        finally:
            run.model._interrupt = False
        if len(seen) < 2:
            raise RuntimeError(f"the pipeline ran {len(seen)} denoising step(s); the answer check needs 2")
        save_output(seen[1] - seen[0], path, perturb=perturb)
