"""`Literal` aliases: the single source of allowed values.

The schema enums, the CLI choices and the registries of backends and tasks are checked against these by
``tests/test_registry.py``.
"""

from __future__ import annotations

from typing import Literal, get_args

Status = Literal["pass", "fail", "error"]
Stage = Literal["load", "compile", "run", "oom", "timeout", "crash", "accuracy"]
Device = Literal["cpu", "cuda", "neuron"]
Task = Literal[
    "text-generation", "image-text-to-text", "sentence-embeddings", "text-to-image", "automatic-speech-recognition"
]
Dtype = Literal["float32", "bfloat16", "float16", "float8_e4m3fn"]
Source = Literal["ci", "community", "local"]
View = Literal["trending", "downloads", "selected"]
QuantSupport = Literal["dequantized", "unsupported", "unverified"]
#: Where a predicted job duration comes from (pipeline.queue.durations).
DurationSource = Literal["history", "older-toolchain", "prior"]
#: How an instance is paid for (runners/instances.yaml).
PriceKind = Literal["on_demand", "capacity_block", "reserved"]
#: A serving row's workload (pipeline.serve.WORKLOADS).
ServingWorkloadName = Literal["1k/1k", "8k/1k", "1k/1k-image", "cpu-tiny", "cpu-tiny-image"]
#: A serving run's load generator (pipeline.serve.LOAD_GENERATORS): guidellm or ``vllm bench serve``.
LoadGenerator = Literal["guidellm", "vllm-bench"]
#: The stage matrix's items and device classes (issue 49: data/matrix.parquet, its rows, the page's matrix).
MatrixStage = Literal["plan", "compile", "answer_check", "serve", "warm_start"]
MatrixFeature = Literal["lora", "eagle3", "prefix_caching", "fp8", "mxfp4", "mxfp8"]
#: The matrix features a serving run exercises by a ``vllm serve`` flag alone (pipeline.serve.FEATURE_FLAGS).
FlagFeature = Literal["prefix_caching"]
DeviceClass = Literal["trn2", "trn3", "gpu"]
#: A pinned lm-eval task a served model is scored on (pipeline.serve.EVAL_TASKS).
EvalTaskName = Literal["gsm8k", "trncat-tiny-arith"]
#: Trainium2's logical NeuronCore config: physical cores per logical core.
Lnc = Literal[1, 2]

STATUSES: tuple[str, ...] = get_args(Status)
STAGES: tuple[str, ...] = get_args(Stage)
DEVICES: tuple[str, ...] = get_args(Device)
TASKS: tuple[str, ...] = get_args(Task)
MATRIX_STAGES: tuple[str, ...] = get_args(MatrixStage)
MATRIX_FEATURES: tuple[str, ...] = get_args(MatrixFeature)
FLAG_FEATURES: tuple[str, ...] = get_args(FlagFeature)
DEVICE_CLASSES: tuple[str, ...] = get_args(DeviceClass)
DTYPES: tuple[str, ...] = get_args(Dtype)
SOURCES: tuple[str, ...] = get_args(Source)
VIEWS: tuple[str, ...] = get_args(View)
PRICE_KINDS: tuple[str, ...] = get_args(PriceKind)
SERVING_WORKLOADS: tuple[str, ...] = get_args(ServingWorkloadName)
EVAL_TASK_NAMES: tuple[str, ...] = get_args(EvalTaskName)
LOAD_GENERATOR_NAMES: tuple[str, ...] = get_args(LoadGenerator)
LNCS: tuple[int, ...] = get_args(Lnc)

#: The failure code of a run refused because the host lacked the memory its compile needs (status ``error``;
#: the queue retries it without counting it against the key's retries).
HOST_MEMORY_SHORT = "host_memory_short"
