"""What a sweep costs on the recommended fleet and on the best static fleet of uniform splits (simulated).

The job mix is the planner's output for a realistic queue: the 1,000 real-shaped configs of
``benchmarks/plan_speed.py`` (the fixtures' architectures at varied sizes, seeded) plus the Selected list's
models whose config.json is among ``tests/fixtures/configs``. Each job's runner size is its label's
(``runner_label``); its duration is the duration model's prior (``pipeline.queue.durations.PRIOR``: no Trainium
row exists yet) times a seeded log-normal spread, since real runs of one size vary.

Two fleets run the same sweep in ``pipeline.queue.sweep.simulate``:

- recommended: ``pipeline.queue.fleet.recommend_fleet`` (mixed partitions sized by each size's core-seconds; an idle
  runner re-registers for a smaller waiting size at its next just-in-time cycle);
- static: instances each with one ``--runners N`` (one size per instance, no re-registration), the count per
  size found by search as the fewest that finish within the recommended fleet's makespan.

It prints makespan, instance-hours and the busy fraction of paid core-hours (tail included) of both.

    .venv/bin/python benchmarks/sweep_cost.py [--n 1000] [--seed 0] [--target-hours 24] [--spread 0.35]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from plan_speed import FIXTURES, vary  # noqa: E402

from pipeline.errors import PlanError  # noqa: E402
from pipeline.plan import plan_config, runner_label  # noqa: E402
from pipeline.queue import (  # noqa: E402  # noqa: E402
    PRIOR,  # noqa: E402
    Job,
    SweepResult,
    format_partition,
    recommend_fleet,
    simulate,
)

CORES = 64


def job_mix(n: int, seed: int, spread: float) -> tuple[list[Job], int]:
    """The sweep's jobs, and how many Selected models had a fixture config."""
    bases = {p.stem: json.loads(p.read_text()) for p in sorted(FIXTURES.glob("*.json"))}
    rng = random.Random(seed)
    names = sorted(bases)
    configs = [(f"mix-{i}", vary(bases[names[i % len(names)]], rng, None)) for i in range(n)]
    selected = yaml.safe_load((ROOT / "dataset" / "selected.yaml").read_text())["models"]
    matched = 0
    for entry in selected:
        name = entry["model_id"].split("/")[1].lower()
        base = next((bases[s] for s in names if s in name or name.startswith(s)), None)
        if base is not None:
            configs.append((entry["model_id"], base))
            matched += 1
    noise = random.Random(seed + 1)
    jobs = []
    for name, config in configs:
        try:
            plan = plan_config(config)
        except PlanError:
            continue
        if not plan.fits:
            continue
        size = int(runner_label(plan).rsplit("-", 1)[1].removesuffix("c"))
        seconds = PRIOR.duration(params=plan.params, cores=size).total_s * noise.lognormvariate(0, spread)
        jobs.append(Job(cores=size, seconds=seconds, name=name))
    return jobs, matched


def best_static(jobs: list[Job], within_s: float) -> tuple[dict[int, int], SweepResult]:
    """Per size, the fewest uniform instances (64/size runners each) that finish within ``within_s``."""
    counts: dict[int, int] = {}
    for size in sorted({j.cores for j in jobs}):
        mine = [j for j in jobs if j.cores == size]
        k = 1
        while simulate(mine, [[size] * (CORES // size)] * k, repartition=False).makespan_s > within_s and k < 64:
            k += 1
        counts[size] = k
    layouts = [[size] * (CORES // size) for size, k in sorted(counts.items()) for _ in range(k)]
    return counts, simulate(jobs, layouts, repartition=False)


def line(name: str, result: SweepResult) -> str:
    return (
        f"{name:<12} {result.instances:>3} instance(s)  makespan {result.makespan_s / 3600:6.2f} h  "
        f"{result.instance_hours:7.1f} instance-hours  busy {result.busy_fraction:6.1%}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="configs in the mix (default 1000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target-hours", type=float, default=24.0, help="the sweep should end within")
    parser.add_argument("--spread", type=float, default=0.35, help="log-normal sigma of job durations")
    args = parser.parse_args(argv)

    jobs, matched = job_mix(args.n, args.seed, args.spread)
    sizes: dict[int, int] = {}
    for job in jobs:
        sizes[job.cores] = sizes.get(job.cores, 0) + 1
    work = sum(j.cores * j.seconds for j in jobs) / 3600
    print(f"{len(jobs)} jobs ({args.n} configs + {matched} Selected models with a fixture config)")
    print("runner sizes: " + ", ".join(f"{k} cores: {v}" for k, v in sorted(sizes.items())))
    print(f"work: {work:.1f} NeuronCore-hours (prior durations x log-normal spread {args.spread})")

    layouts, recommended = recommend_fleet(jobs, target_hours=args.target_hours)
    print(line("recommended", recommended))
    for k, layout in enumerate(layouts):
        print(f"  instance {k}: --partition {format_partition(layout)}")
    counts, static = best_static(jobs, recommended.makespan_s)
    print(line("static", static))
    print("  " + ", ".join(f"{k} x --runners {CORES // size}" for size, k in sorted(counts.items())))
    saved = 1 - recommended.instance_hours / static.instance_hours if static.instance_hours else 0.0
    goal = "met" if recommended.busy_fraction >= 0.85 else "NOT met"
    than = f"{saved:.0%} fewer" if saved >= 0 else f"{-saved:.0%} more"
    print(f"instance-hours: recommended {recommended.instance_hours:.1f} vs static {static.instance_hours:.1f} "
          f"({than}); busy fraction goal >= 85%: {goal}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
