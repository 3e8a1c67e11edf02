"""The task registry: one module per task, one line here.

A task knows how to load the model and its processor, build the fixed workload's inputs and count tokens.

May import: the top-level modules (each task imports its own library lazily, in the child). Imported by the
rest of :mod:`pipeline.bench` only.
"""

from __future__ import annotations

from pipeline.bench.tasks.base import TaskRunner
from pipeline.registry import load_entry

#: name -> "module:Class". Adding a task = one module + one line here + tests.
REGISTRY: dict[str, str] = {
    "text-generation": "pipeline.bench.tasks.text_generation:TextGeneration",
    "image-text-to-text": "pipeline.bench.tasks.image_text_to_text:ImageTextToText",
    "sentence-embeddings": "pipeline.bench.tasks.sentence_embeddings:SentenceEmbeddings",
    "text-to-image": "pipeline.bench.tasks.text_to_image:TextToImage",
    "automatic-speech-recognition": "pipeline.bench.tasks.speech_recognition:SpeechRecognition",
}


def get_task(name: str) -> TaskRunner:
    """Instantiate the task called ``name``.

    Raises:
        ConfigError: no such task.
    """
    return load_entry(REGISTRY, name, what="task")()


__all__ = ["REGISTRY", "TaskRunner", "get_task"]
