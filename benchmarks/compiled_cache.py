"""What a compiled-cache bundle costs and saves (issue 25).

1. The bundle's own cost, on a synthetic NEFF cache of ``--mib`` MiB in ``--files`` files (half random bytes, which
   do not compress, half repetitive): seconds and MB/s to pack it (bench), to check it (collect, publish) and to
   unpack it (trncat's unpack, and the generated run.py's own copy of the rule, each one read of one file), and the
   bundle's size; paired, each ``--repeat`` times (medians), with ``tar -cf - | gzip -N`` (the alternative: one
   core) and ``tar -xzf`` of the bundle. ``--levels 1,6,9`` packs at each deflate level too (how
   :data:`pipeline.backends.neuron.deflate.LEVEL` was chosen).
2. With ``--emulated``: the saving on the Neuron emulator, as processes, for each of the demo's rows (``--tasks``:
   the tiny Llama, Llava, sentence-BERT, Stable Diffusion and Whisper): ``trncat bench --device neuron`` on
   emulated machine A, its bundle published to a local hub, then on *another* emulated machine B the row's run.py
   once ``--cold`` and once ``--require-warm`` (and, for the Llama, once ``--require-warm`` for a fine-tune of it:
   other weights, the base's config, the demo's fine-tune), each in a fresh process with an empty NEFF cache:
   their first call, neuronx-cc's seconds, the warm ÷ cold first call per row (goal: at most 10 %) and the cache's
   hit rate over every warm run (goal: at least 95 %). The emulator's compile takes ``--compile-seconds`` per graph:
   the figures show the mechanism, never Trainium's compile times.

    .venv/bin/python benchmarks/compiled_cache.py [--mib 256] [--files 64] [--repeat 3] [--levels 1,6,9]
                                                  [--emulated [--compile-seconds 2] [--tasks text-generation,...]]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pipeline.backends.neuron import bundle_beside, check_bundle, pack_cache, unpack_bundle
from pipeline.workload import CLIPS_DIR, speech_clips


def synthetic_cache(root: Path, *, mib: int, files: int) -> int:
    """A cache laid out as TorchNeuron's (``ab/cd/<key>.neff``) holding ``mib`` MiB; returns its bytes."""
    size = mib * 1024**2 // files
    total = 0
    for index in range(files):
        key = f"{index:04x}" + "0" * 60
        path = root / key[:2] / key[2:4] / f"{key}.neff"
        path.parent.mkdir(parents=True, exist_ok=True)
        body = os.urandom(size // 2) + bytes(range(256)) * (size // 512)
        path.write_bytes(b"NEFF" + body)
        total += len(body) + 4
    return total


def _cpu_seconds() -> float:
    """CPU seconds of this process (all its threads) and of its finished children (tar, gzip)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def timed(what: str, mib: float, fn: object, *, repeat: int = 1) -> float:
    """The median seconds of ``repeat`` runs of ``fn``, printed with MB/s of the cache's bytes, and the CPU
    seconds it took (a figure a busy machine changes less than the wall's: on two idle cores, a job of two busy
    threads takes about half its CPU seconds)."""
    times, cpu = [], []
    for _ in range(repeat):
        start, used = time.perf_counter(), _cpu_seconds()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
        cpu.append(_cpu_seconds() - used)
    seconds, cpu_s = statistics.median(times), statistics.median(cpu)
    print(f"{what:<38} {seconds:7.2f} s {mib * 1.048576 / seconds:7.1f} MB/s | {cpu_s:6.2f} CPU-s "
          f"{mib * 1.048576 / cpu_s:7.1f} MB/CPU-s  (median of {repeat})")  # fmt: skip
    return seconds


def _shell(command: str) -> None:
    subprocess.run(["bash", "-c", command], check=True)


def bundle_costs(*, mib: int, files: int, repeat: int, levels: list[int]) -> None:
    from pipeline.backends.neuron import deflate
    from pipeline.render import run_script
    from tests.support.records import sample_record

    with tempfile.TemporaryDirectory(prefix="trncat-bundle-bench-") as tmp:
        root = Path(tmp)
        raw = synthetic_cache(root / "cache", mib=mib, files=files)
        out = root / "r.neff-cache.tar.gz"
        print(f"cache: {files} NEFF files, {raw / 1024**2:.0f} MiB; {os.cpu_count()} CPU(s), load average "
              f"{os.getloadavg()[0]:.1f}")  # fmt: skip
        for level in levels:  # the level's choice: what each costs and saves on this cache
            timed(f"pack at level {level}", mib, lambda level=level: pack_cache(root / "cache", out, level=level),
                  repeat=repeat)  # fmt: skip
            print(f"  bundle {out.stat().st_size / raw:.1%} of the cache")
        timed(f"pack (bench, level {deflate.LEVEL}, 2 threads)", mib, lambda: pack_cache(root / "cache", out),
              repeat=repeat)  # fmt: skip
        info = check_bundle(out)
        print(f"bundle: {info.bytes / 1024**2:.0f} MiB ({info.bytes / raw:.0%} of the cache), {info.files} files")
        if shutil.which("gzip") and shutil.which("tar"):
            for level in (1, 6):
                command = f"tar -C {root / 'cache'} -cf - . | gzip -{level} -n > {root}/alt.tgz"
                timed(f"tar -cf - | gzip -{level} (alternative)", mib, lambda c=command: _shell(c), repeat=repeat)
        timed("check (collect, publish)", mib, lambda: check_bundle(out, sha256=info.sha256), repeat=repeat)

        def unpack() -> None:
            shutil.rmtree(root / "u1", ignore_errors=True)
            unpack_bundle(out, root / "u1", sha256=info.sha256)

        timed("unpack (trncat)", mib, unpack, repeat=repeat)
        namespace: dict[str, object] = {"__name__": "run"}
        exec(compile(run_script(sample_record()), "run.py", "exec"), namespace)  # noqa: S102 - defines only
        (root / "run-root").mkdir(mode=0o700)
        fd = os.open(root / "run-root", os.O_RDONLY | os.O_DIRECTORY)
        count = iter(range(10**6))

        def run_unpack() -> None:
            namespace["unpack_bundle"](str(out), info.sha256, fd, f"row-{next(count)}")  # type: ignore[operator]

        try:
            timed("check + unpack (run.py)", mib, run_unpack, repeat=repeat)
        finally:
            os.close(fd)
        if shutil.which("tar"):

            def untar() -> None:
                shutil.rmtree(root / "u2", ignore_errors=True)
                (root / "u2").mkdir()
                _shell(f"tar -C {root / 'u2'} -xzf {out}")

            timed("tar -xzf (alternative, no check)", mib, untar, repeat=repeat)


#: The demo's rows on the emulator: (task, the tiny model's builder, a fine-tune's builder or None, bench options).
def _demo_rows() -> list[tuple[str, object, object, list[str]]]:
    from pipeline.testing import (
        build_tiny_llama,
        build_tiny_llava,
        build_tiny_sentence_bert,
        build_tiny_stable_diffusion,
        build_tiny_whisper,
    )

    def tuned(folder: Path) -> Path:  # the demo's fine-tune: other weights, the base's config
        return build_tiny_llama(folder, seed=7)

    small = ["--workload", "input_tokens=16", "--workload", "output_tokens=4"]
    return [
        ("text-generation", build_tiny_llama, tuned, small),
        ("image-text-to-text", build_tiny_llava, None, []),
        ("sentence-embeddings", build_tiny_sentence_bert, None, []),
        ("text-to-image", build_tiny_stable_diffusion, None, []),
        ("automatic-speech-recognition", build_tiny_whisper, None, []),
    ]


def emulated_saving(*, compile_seconds: float, tasks: list[str]) -> None:
    from pipeline.localhub import LocalHub
    from tests.support.neuron import Machine, build

    rows = [row for row in _demo_rows() if row[0] in tasks]
    with tempfile.TemporaryDirectory(prefix="trncat-compiled-bench-") as tmp, LocalHub(Path(tmp) / "hub") as hub:
        work = Path(tmp)
        machine_a = build(work / "trn2", Machine.of("trn2.3xlarge", compile_seconds=compile_seconds))
        machine_b = build(work / "trn2-b", Machine.of("trn2.48xlarge", compile_seconds=compile_seconds))
        ratios: list[tuple[str, float]] = []
        hits = misses = 0
        for task, builder, fine_tune, options in rows:
            saving = _row_saving(work / task, hub, machine_a, machine_b, task, builder, fine_tune, options)
            ratios.extend(saving["ratios"])
            hits, misses = hits + saving["hits"], misses + saving["misses"]
        print(f"\nover {len(rows)} demo row(s): warm / cold first call " +
              ", ".join(f"{label} {ratio:.1%}" for label, ratio in ratios) +
              (f"; median {statistics.median(r for _, r in ratios):.1%}, worst {max(r for _, r in ratios):.1%} "
               "(goal <= 10 %)" if ratios else ""))  # fmt: skip
        if hits + misses:
            print(f"cache hit rate over the warm runs: {hits / (hits + misses):.1%} ({hits} of {hits + misses} "
                  "graphs; goal >= 95 %)")  # fmt: skip


def _row_saving(work: Path, hub: object, machine_a: Path, machine_b: Path, task: str, builder: object,
                fine_tune: object, options: list[str]) -> dict:  # fmt: skip
    """One demo row: its bench on machine A, its bundle published, its run.py cold and warm on machine B."""
    from pipeline.hub import Hub, point_client_at
    from pipeline.publish import publish_bundles
    from pipeline.render import run_script
    from tests.support.neuron import environment

    work.mkdir(parents=True)
    model = builder(work / "model")  # type: ignore[operator]
    env = {**environment(machine_a), "GITHUB_RUN_ID": "1", "GITHUB_SHA": "ab" * 20, "RUNNER_NAME": "bench",
           "TOKENIZERS_PARALLELISM": "false", "TRNCAT_REFERENCE_CACHE": str(work / "ref")}  # fmt: skip
    out = work / "r.json"
    subprocess.run([sys.executable, "-m", "pipeline", "bench", str(model), "--task", task, "--device", "neuron",
                    "--model-id", f"acme/tiny-{task}", "--source", "ci", *options, "--iterations", "1", "--out",
                    str(out)], env=env, check=True, capture_output=True, timeout=1200)  # fmt: skip
    record = json.loads(out.read_text())
    if record["status"] != "pass" or not bundle_beside(out).is_file():
        print(f"{task}: {record['status']} on the emulator, no bundle ({record.get('compiled_cache_skipped')}): "
              "no saving to measure")  # fmt: skip
        return {"ratios": [], "hits": 0, "misses": 0}
    restore = point_client_at(hub.url, cache_dir=work / "hf-cache")  # type: ignore[attr-defined]
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            client = Hub(endpoint=hub.url, token="t", cache_dir=work / "hf-cache")  # type: ignore[attr-defined]
            publish_bundles([(str(out), record)], hub=client, repo="trncat/trncat-compiled")
    finally:
        restore()
    m = record["metrics"]
    print(f"{task}: emulated bench compile_s {m['compile_s']:.2f} s, neuronx_cc_s {m['neuronx_cc_s']:.2f} s, "
          f"bundle {record['compiled_cache']['bytes']} bytes, {record['compiled_cache']['files']} files")  # fmt: skip
    firsts: dict[str, float] = {}
    compiles: dict[str, float] = {}
    hits = misses = 0
    runs = [("cold", model, ["--cold"]), ("warm", model, ["--require-warm"])]
    if fine_tune is not None:
        runs.append(("fine-tune warm", fine_tune(work / "tuned"), ["--require-warm"]))  # type: ignore[operator]
    for label, folder_model, extra in runs:
        folder = work / label.replace(" ", "-")
        folder.mkdir()
        (folder / "run.py").write_text(run_script(record))
        run_env = {**environment(machine_b), "HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(folder / "hf"),  # type: ignore[attr-defined]
                   "HF_HUB_DISABLE_XET": "1", "TORCH_NEURONX_NEFF_CACHE_DIR": str(folder / "neff"),
                   "XDG_CACHE_HOME": str(folder / "xdg")}  # fmt: skip
        start = time.perf_counter()
        command = [sys.executable, "run.py", "--model", str(folder_model), "--iterations", "1", *extra]
        if task == "automatic-speech-recognition":  # its run.py transcribes files: the workload's clips
            command += [str(CLIPS_DIR / clip.name) for clip in speech_clips()]
        done = subprocess.run(command, cwd=folder, env=run_env, capture_output=True, text=True, timeout=1200)
        if done.returncode not in (0, 3):  # 3: --require-warm and a graph missed: counted below
            print(f"  run.py {label} exited {done.returncode}: {(done.stdout + done.stderr)[-600:]}")
            return {"ratios": [], "hits": hits, "misses": misses}
        total = time.perf_counter() - start
        first = re.search(r"first_call_s\s+([\d.]+)", done.stdout)
        cc = re.search(r"neuronx_cc_s\s+(.*)", done.stdout)
        counted = re.search(r"warm_start\s+hits=(\d+) misses=(\d+)", done.stdout)
        if first:
            firsts[label] = float(first.group(1))
        if cc and (seconds := re.match(r"([\d.]+)", cc.group(1))):
            compiles[label] = float(seconds.group(1))
        if counted and label != "cold":
            hits, misses = hits + int(counted.group(1)), misses + int(counted.group(2))
        print(f"  run.py {label:<15} machine B, process {total:6.2f} s, first call "
              f"{first.group(1) if first else '?'} s, neuronx_cc_s {cc.group(1) if cc else '?'}")  # fmt: skip
    ratios = [(f"{task}" + (" (fine-tune)" if label != "warm" else ""), firsts[label] / firsts["cold"])
              for label in ("warm", "fine-tune warm") if label in firsts and firsts.get("cold")]  # fmt: skip
    for name, ratio in ratios:
        print(f"  warm / cold first call, {name}: {ratio:.1%} (goal <= 10 %)")
    if compiles.get("cold"):
        saved = compiles.get("warm", float("nan")) / compiles["cold"]
        print(f"  warm / cold neuronx-cc seconds: {saved:.1%} (the compile the cache saves; the first call's wall "
              "time also holds dynamo's tracing on the CPU)")  # fmt: skip
    return {"ratios": ratios, "hits": hits, "misses": misses}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement (the median is printed)")
    parser.add_argument("--levels", default="", help="also pack at these deflate levels (comma-separated)")
    parser.add_argument("--emulated", action="store_true", help="also the emulated bench -> publish -> run.py")
    parser.add_argument("--compile-seconds", type=float, default=2.0, help="the emulator's compile per graph")
    tasks = [row[0] for row in _demo_rows()]
    parser.add_argument("--tasks", default=",".join(tasks), help=f"the demo rows measured (default: all: {tasks})")
    args = parser.parse_args()
    levels = [int(level) for level in args.levels.split(",") if level]
    bundle_costs(mib=args.mib, files=args.files, repeat=args.repeat, levels=levels)
    if args.emulated:
        emulated_saving(compile_seconds=args.compile_seconds, tasks=args.tasks.split(","))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
