"""What a compiled-cache bundle costs and saves (issue 25).

1. The bundle's own cost, on a synthetic NEFF cache of ``--mib`` MiB in ``--files`` files (half random bytes, which
   do not compress, half repetitive): seconds and MB/s to pack it (bench), to check it (collect, publish) and to
   unpack it (trncat's unpack, and the generated run.py's own copy of the rule, each one read of one file), and the
   bundle's size; paired, each ``--repeat`` times (medians), with ``tar -cf - | gzip -N`` (the alternative: one
   core) and ``tar -xzf`` of the bundle. ``--levels 1,6,9`` packs at each deflate level too (how
   :data:`pipeline.backends.neuron.deflate.LEVEL` was chosen).
2. With ``--emulated``: the saving on the Neuron emulator, as processes: ``trncat bench --device neuron`` of the tiny
   Llama on emulated machine A, its bundle published to a local hub, then on *another* emulated machine B the row's
   run.py once ``--cold``, once ``--require-warm`` for the base and once ``--require-warm`` for a fine-tune of it
   (other weights, the base's config: the demo's fine-tune), each in a fresh process with an empty NEFF cache:
   their first call, neuronx-cc's seconds, the warm ÷ cold first call (goal: at most 10 %) and the cache's hit
   rate over the warm runs (goal: at least 95 %). The emulator's compile takes ``--compile-seconds`` per graph:
   the figures show the mechanism, never Trainium's compile times.

    .venv/bin/python benchmarks/compiled_cache.py [--mib 256] [--files 64] [--repeat 3] [--levels 1,6,9]
                                                  [--emulated [--compile-seconds 2]]
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
    from pipeline.testing.records import sample_record

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


def emulated_saving(*, compile_seconds: float) -> None:
    from pipeline.localhub import LocalHub
    from pipeline.publish import publish_bundles
    from pipeline.render import run_script
    from pipeline.testing import build_tiny_llama
    from pipeline.testing.neuron import Machine, build, environment

    with tempfile.TemporaryDirectory(prefix="trncat-compiled-bench-") as tmp, LocalHub(Path(tmp) / "hub") as hub:
        work = Path(tmp)
        root = build(work / "trn2", Machine.of("trn2.3xlarge", compile_seconds=compile_seconds))
        model = build_tiny_llama(work / "tiny-llama")
        env = {**environment(root), "GITHUB_RUN_ID": "1", "GITHUB_SHA": "ab" * 20, "RUNNER_NAME": "bench",
               "TOKENIZERS_PARALLELISM": "false", "TRNCAT_REFERENCE_CACHE": str(work / "ref")}  # fmt: skip
        out = work / "r.json"
        subprocess.run([sys.executable, "-m", "pipeline", "bench", str(model), "--task", "text-generation",
                        "--device", "neuron", "--model-id", "acme/tiny-llama", "--source", "ci", "--workload",
                        "input_tokens=16", "--workload", "output_tokens=4", "--iterations", "1", "--out", str(out)],
                       env=env, check=True, capture_output=True, timeout=1200)  # fmt: skip
        record = json.loads(out.read_text())
        from pipeline.hub import Hub, point_client_at

        restore = point_client_at(hub.url, cache_dir=work / "hf-cache")
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                client = Hub(endpoint=hub.url, token="t", cache_dir=work / "hf-cache")
                publish_bundles([(str(out), record)], hub=client, repo="trncat/trncat-compiled")
        finally:
            restore()
        m = record["metrics"]
        print(f"emulated bench: compile_s {m['compile_s']:.2f} s, neuronx_cc_s {m['neuronx_cc_s']:.2f} s, "
              f"warm_start_s {m['warm_start_s']:.2f} s, bundle {record['compiled_cache']['bytes']} bytes "
              f"(bundle file {bundle_beside(out).stat().st_size} bytes)")  # fmt: skip
        other = build(work / "trn2-b", Machine.of("trn2.48xlarge", compile_seconds=compile_seconds))
        tuned = build_tiny_llama(work / "tiny-llama-tuned", seed=7)
        firsts: dict[str, float] = {}
        compiles: dict[str, float] = {}
        hits = misses = 0
        runs = (("cold", model, ["--cold"]), ("warm", model, ["--require-warm"]),
                ("fine-tune warm", tuned, ["--require-warm"]))  # fmt: skip
        for label, folder_model, extra in runs:
            folder = work / label.replace(" ", "-")
            folder.mkdir()
            (folder / "run.py").write_text(run_script(record))
            run_env = {**environment(other), "HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(folder / "hf"),
                       "HF_HUB_DISABLE_XET": "1", "TORCH_NEURONX_NEFF_CACHE_DIR": str(folder / "neff"),
                       "XDG_CACHE_HOME": str(folder / "xdg")}  # fmt: skip
            start = time.perf_counter()
            command = [sys.executable, "run.py", "--model", str(folder_model), "--iterations", "1", *extra]
            done = subprocess.run(command, cwd=folder, env=run_env, capture_output=True, text=True, check=True,
                                  timeout=1200)  # fmt: skip
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
            print(f"run.py {label:<15} machine B, process {total:6.2f} s, first call "
                  f"{first.group(1) if first else '?'} s, neuronx_cc_s {cc.group(1) if cc else '?'}")  # fmt: skip
        if "cold" in firsts and "warm" in firsts and firsts["cold"] > 0:
            print(f"warm / cold first call: {firsts['warm'] / firsts['cold']:.1%} (goal <= 10 %); fine-tune: "
                  f"{firsts.get('fine-tune warm', float('nan')) / firsts['cold']:.1%}")  # fmt: skip
        if compiles.get("cold"):
            print(f"warm / cold neuronx-cc seconds: {compiles.get('warm', float('nan')) / compiles['cold']:.1%} "
                  "(the compile the cache saves; the first call's wall time also holds dynamo's tracing on the CPU, "
                  "which a loaded machine stretches)")  # fmt: skip
        if hits + misses:
            print(f"cache hit rate over the warm runs: {hits / (hits + misses):.1%} ({hits} of {hits + misses} "
                  "graphs; goal >= 95 %)")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement (the median is printed)")
    parser.add_argument("--levels", default="", help="also pack at these deflate levels (comma-separated)")
    parser.add_argument("--emulated", action="store_true", help="also the emulated bench -> publish -> run.py")
    parser.add_argument("--compile-seconds", type=float, default=2.0, help="the emulator's compile per graph")
    args = parser.parse_args()
    levels = [int(level) for level in args.levels.split(",") if level]
    bundle_costs(mib=args.mib, files=args.files, repeat=args.repeat, levels=levels)
    if args.emulated:
        emulated_saving(compile_seconds=args.compile_seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
