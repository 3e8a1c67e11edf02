"""Time the planner on 1,000 configs: the real architectures of tests/fixtures/configs at varied sizes.

Each config is one of the fixtures with its depth, MLP width and vocabulary redrawn (seeded), so many
configs share an architecture but differ in size; the planner must count each exactly, and its cache
only helps where two draws coincide, as fine-tunes of one base model do on the Hub. The draw is the realistic
mix of the original fixtures; the held-out trending configs (SOURCES.yaml: gpt-oss, DeepSeek-V3, Qwen3-235B,
...) are timed apart, each once at its published size, since a sweep meets each of those once, not 40 times.

    .venv/bin/python benchmarks/plan_speed.py [--n 1000] [--seed 0] [--distinct]

Prints the wall time of planning (transformers' imports included) and how many configs were distinct.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "configs"
LAYER_SCALES = (0.5, 0.75, 1.0, 1.25, 1.5)
MLP_SCALES = (1.0, 1.25, 1.5)
VOCABS = (None, 131072, 152064)


def vary(config: dict[str, Any], rng: random.Random, serial: int | None) -> dict[str, Any]:
    """A copy of ``config`` with its text decoder's depth, MLP width and vocabulary redrawn.

    ``serial`` (when given) is added to the depth, which makes every config distinct.
    """
    out = copy.deepcopy(config)
    text = out["text_config"] if isinstance(out.get("text_config"), dict) else out
    layer_key = "n_layer" if "n_layer" in text else "num_hidden_layers"
    layers = text.get(layer_key, 32)
    text[layer_key] = max(1, round(layers * rng.choice(LAYER_SCALES))) + (serial or 0)
    # Per-layer lists (layer_types, no_rope_layers, ...) must keep one entry per layer: repeat their pattern.
    for key, value in list(text.items()):
        if isinstance(value, list) and len(value) == layers and layers > 1:
            text[key] = [value[i % layers] for i in range(text[layer_key])]
    mlp_key = "moe_intermediate_size" if "moe_intermediate_size" in text else "intermediate_size"
    if mlp_key in text:
        text[mlp_key] = int(text[mlp_key] * rng.choice(MLP_SCALES)) // 64 * 64
    vocab = rng.choice(VOCABS)
    # Only ever grow the vocabulary: special token ids in the config must stay inside it.
    if vocab is not None and vocab > text.get("vocab_size", 0):
        text["vocab_size"] = vocab
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="configs to plan (default 1000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--distinct", action="store_true", help="make every config distinct (no cache hits)")
    args = parser.parse_args(argv)

    import yaml

    held_out = set(yaml.safe_load((FIXTURES / "SOURCES.yaml").read_text()))
    paths = sorted(FIXTURES.glob("*.json"))
    bases = [json.loads(p.read_text()) for p in paths if p.stem not in held_out]
    trending = [json.loads(p.read_text()) for p in paths if p.stem in held_out]
    if not bases:
        print(f"no fixtures in {FIXTURES}", file=sys.stderr)
        return 1
    rng = random.Random(args.seed)
    configs = [vary(bases[i % len(bases)], rng, i // len(bases) if args.distinct else None) for i in range(args.n)]

    start = time.perf_counter()
    sys.path.insert(0, str(ROOT))
    from pipeline.plan import config_hash, plan_config

    imported = time.perf_counter()
    cores: dict[int, int] = {}
    for config in configs:
        plan = plan_config(config)
        cores[plan.cores] = cores.get(plan.cores, 0) + 1
    done = time.perf_counter()

    distinct = len({config_hash(c) for c in configs})
    print(f"planned {len(configs)} configs ({distinct} distinct, {len(bases)} architectures)")
    # transformers and each architecture's modeling module load lazily, inside the planning time.
    print(f"planning {done - imported:.2f} s, total with imports {done - start:.2f} s")
    print("cores needed: " + ", ".join(f"{k}: {v}" for k, v in sorted(cores.items())))
    start = time.perf_counter()
    for config in trending:
        plan_config(config)
    print(f"held-out trending configs: {len(trending)} planned in {time.perf_counter() - start:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
