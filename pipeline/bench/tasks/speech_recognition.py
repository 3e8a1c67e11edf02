"""automatic-speech-recognition: transformers' pipeline transcribes the project's clips, one at a time.

Run as its users run it: ``transformers.pipeline("automatic-speech-recognition", model=folder, dtype=...,
trust_remote_code=False)``, then a call per clip with its 16 kHz samples (``{"raw": ..., "sampling_rate": 16000}``:
no resampling, no ffmpeg). The pipeline picks the model class (a Whisper-style encoder-decoder, another
sequence-to-sequence model, a CTC model) from the config, with transformers' own code only. A model that generates
gets at most ``workload.output_tokens`` new tokens per clip (greedy, the model's generation config otherwise).

On a compiling backend the encoder is compiled in place (``torch.compile`` over fixed shapes: Whisper's feature
extractor pads every clip to its 30 s window, so one graph serves every clip); the decoder's steps run as they are,
as the VAE does in text-to-image. A model without a separate encoder (CTC) is compiled whole, one graph per clip
length.

Measured: each clip's latency (the pipeline's call: features, encoder, decoding, text), p50/p90 over the clips and
the timed passes; the real-time factor (a pass's seconds over the clips' seconds of audio, p50 over the passes);
tokens per second (the transcripts' tokens, by the model's tokenizer without special tokens, over the pass's
seconds); the word error rate of the first pass's transcripts against the true ones (:mod:`pipeline.bench.wer`).
The answer checked is the transcripts, against the CPU float32 reference's by word error rate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from pipeline.bench.tasks.base import Measured, OneCoreTask, Run, percentile, quantiles
from pipeline.bench.wer import word_error_rate
from pipeline.errors import ConfigError
from pipeline.workload import CLIP_RATE, speech_clips


class SpeechRecognition(OneCoreTask):
    library: ClassVar[str] = "the automatic-speech-recognition pipeline"

    def load_pipeline(self, path: Path, *, dtype: Any) -> Any:
        from transformers import pipeline
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        return pipeline(
            "automatic-speech-recognition", model=str(path), dtype=dtype, device="cpu", trust_remote_code=False
        )

    def modules(self, model: Any) -> list[Any]:
        return [model.model]

    def to_device(self, model: Any, device: Any) -> Any:
        import torch

        model.model = model.model.to(device)
        model.device = torch.device(device)
        return model

    def compiled_part(self, model: Any) -> Any:
        return model.model.get_encoder() if model.model.config.is_encoder_decoder else model.model

    def setup(self, run: Run) -> None:
        clips = speech_clips()
        expected = run.spec.workload.audio_clips
        if expected is not None and expected != len(clips):
            raise ConfigError(f"the workload names {expected} clip(s); pipeline/clips holds {len(clips)}")
        run.state["clips"] = clips
        generates = bool(run.model.model.can_generate())
        run.state["kwargs"] = (
            {"generate_kwargs": {"max_new_tokens": run.spec.workload.output_tokens}} if generates else {}
        )

    def _transcribe(self, run: Run, clip: Any) -> str:
        # a fresh dict each call: the pipeline pops "raw" out of the one it is given
        out = run.model({"raw": clip.samples, "sampling_rate": CLIP_RATE}, **run.state["kwargs"])
        return str(out["text"])

    def call(self, run: Run) -> None:
        for clip in run.state["clips"]:
            self._transcribe(run, clip)

    def measure(self, run: Run) -> Measured:
        clips = run.state["clips"]
        audio_s = sum(clip.seconds for clip in clips)
        latencies: list[float] = []
        passes: list[float] = []
        transcripts: list[str] = []
        for iteration in range(run.spec.iterations):
            total = 0.0
            for clip in clips:
                start = run.clock()
                text = self._transcribe(run, clip)
                run.backend.synchronize()
                elapsed = run.clock() - start
                latencies.append(elapsed)
                total += elapsed
                if iteration == 0:
                    transcripts.append(text)
            passes.append(total)
        pass_p50 = percentile(passes, 50)
        tokens = sum(len(run.model.tokenizer(text, add_special_tokens=False)["input_ids"]) for text in transcripts)
        return Measured(
            metrics={
                "latency_s": quantiles(latencies),
                "decode_tokens_per_s": tokens / pass_p50 if pass_p50 > 0 else None,
                "real_time_factor": pass_p50 / audio_s,
                "audio_seconds": round(audio_s, 6),
                "wer": word_error_rate([clip.transcript for clip in clips], transcripts),
                "latencies_s": latencies,
            },
            steady_s=pass_p50,
            extra={"transcripts": transcripts, "pass_seconds": passes},
        )

    def capture(self, run: Run, path: Path, *, perturb: bool = False) -> None:
        """Save the clips' transcripts (``torch.save``: ``{"transcripts": [str, ...]}``, strings only)."""
        import torch

        transcripts = [self._transcribe(run, clip) for clip in run.state["clips"]]
        if perturb:  # a wrong answer whatever the model says: other words, in another order
            transcripts = [" ".join(["perturbed", *reversed(text.split())]) for text in transcripts]
        torch.save({"transcripts": transcripts}, path)
