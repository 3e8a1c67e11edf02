"""image-text-to-text: a vision-language model describes a synthetic image given a text prompt.

The image is a deterministic gradient of ``image_size`` pixels square; the text part of the prompt is
``input_tokens`` tokens long before the chat template and the image tokens are added.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pipeline.bench.tasks.generation import GenerationTask
from pipeline.workload import Workload


def synthetic_image(size: int) -> Any:
    """A deterministic RGB gradient image (no file, no download)."""
    import numpy as np
    from PIL import Image

    ramp = np.linspace(0, 255, size, dtype=np.float32)
    red = np.tile(ramp, (size, 1))
    green = red.T
    blue = np.full((size, size), 128, dtype=np.float32)
    return Image.fromarray(np.stack([red, green, blue], axis=-1).astype(np.uint8), mode="RGB")


class ImageTextToText(GenerationTask):
    auto_model: ClassVar[str] = "AutoModelForImageTextToText"

    auto_processor: ClassVar[str] = "AutoProcessor"

    def make_inputs(self, processor: Any, workload: Workload) -> dict[str, Any]:
        tokenizer = getattr(processor, "tokenizer", processor)
        text = tokenizer.decode(self.prompt_ids(tokenizer, workload.input_tokens))
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
        prompt = processor.apply_chat_template(messages, add_generation_prompt=True)
        image = synthetic_image(workload.image_size or 224)
        batch = workload.batch_size
        inputs = processor(images=[image] * batch, text=[prompt] * batch, return_tensors="pt", padding=True)
        return dict(inputs)
