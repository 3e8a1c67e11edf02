"""Commands beside the stages: ``trncat doctor`` (is this machine ready to benchmark?), ``trncat reap`` (the
benchmark job's cleanup) and ``trncat localhub`` (the offline Hub the demo and the tests use)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pipeline.cli.registry import command, count, in_file, make_hub, out_folder
from pipeline.errors import ConfigError

# -- localhub -------------------------------------------------------------------------------------------


def _localhub_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["serve"])
    p.add_argument("--root", type=out_folder, required=True, metavar="DIR", help="where repos are stored")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=count(0, 65535), default=0, help="0 picks a free port (default)")
    p.add_argument(
        "--tokens-file",
        type=Path,
        metavar="FILE",
        help="write tokens, one a line: every write must send one (default: anyone may write)",
    )


@command(
    "localhub",
    help="Serve the embedded Hub-compatible server (for offline runs and tests).",
    example="trncat localhub serve --root /tmp/hub --port 8999",
    arguments=_localhub_args,
)
def _localhub(args: argparse.Namespace) -> int:
    from pipeline.localhub import serve

    tokens = None
    if args.tokens_file is not None:
        try:
            text = args.tokens_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"--tokens-file {args.tokens_file}: cannot read it ({_reason(exc)})") from None
        tokens = [line.strip() for line in text.splitlines() if line.strip()]
        if not tokens:
            raise ConfigError(f"{args.tokens_file}: no token in it")
    try:
        serve(
            root=args.root,
            host=args.host,
            port=args.port,
            tokens=tokens,
            ready=lambda url: print(f"local hub serving at {url}", flush=True),
        )
    except OSError as exc:  # a port in use, an address not of this machine, a root it may not write
        import errno

        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"--port {args.port}: already in use on {args.host} (choose another, or 0)") from None
        raise ConfigError(f"cannot serve on {args.host}:{args.port} from {args.root}: {_reason(exc)}") from None
    return 0


def _reason(exc: OSError | UnicodeDecodeError) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0]


# -- reap -----------------------------------------------------------------------------------------------


@command(
    "reap",
    help="End what a killed trncat bench or serve left running: its benchmark child, engine, load generator "
    "(the benchmark job's cleanup step).",
    example="trncat reap",
    arguments=lambda _: None,  # no options
)
def _reap(args: argparse.Namespace) -> int:
    from pipeline.backends import reap_orphans

    ended = reap_orphans()
    print(f"ended {len(ended)} process group(s) of children whose trncat bench or serve was killed", flush=True)
    return 0


# -- doctor ---------------------------------------------------------------------------------------------


def _doctor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the whole report as JSON")
    p.add_argument("--smoke", action="store_true", help="also benchmark a tiny local model on 1 and 2 cores")
    p.add_argument(
        "--serving-smoke",
        action="store_true",
        help="also serve the tiny model with vLLM Neuron and sweep it with guidellm (what a first serving run settles)",
    )
    p.add_argument("--cores", type=count(), metavar="N", help="check that a run of N cores fits here")
    p.add_argument("--hub", action="store_true", help="also check that the Hub answers (HF_ENDPOINT, HF_TOKEN)")
    p.add_argument("--toolchain", type=in_file, metavar="FILE", help="default: runners/toolchain.yaml")


@command(
    "doctor",
    help="Check that this machine is ready to benchmark on Neuron: one line per check, with its fix.",
    example="trncat doctor --smoke --cores 2",
    arguments=_doctor_args,
)
def _doctor(args: argparse.Namespace) -> int:
    import tempfile

    from pipeline.backends.neuron import NeuronBackend
    from pipeline.bench import run_checks, smoke, smoke_line
    from pipeline.queue import load_apt_pins, load_toolchain

    backend = NeuronBackend()
    report = run_checks(
        backend,
        toolchain=load_toolchain(args.toolchain),
        apt=load_apt_pins(args.toolchain),
        cores=args.cores,
        hub=make_hub() if args.hub else None,
    )
    if args.smoke:
        if report.smoke_ready:
            with tempfile.TemporaryDirectory(prefix="trncat-doctor-") as tmp:
                report.smoke = smoke(backend, work=Path(tmp))
        else:
            print("smoke run skipped: fix the failed device and package checks first", file=sys.stderr)
            report.smoke = []
    serving = None
    if args.serving_smoke:
        from pipeline.serve import serving_smoke

        with tempfile.TemporaryDirectory(prefix="trncat-doctor-serve-") as tmp:
            serving = serving_smoke("neuron", work=Path(tmp))
    if args.json:
        print(json.dumps({**report.to_dict(), **({"serving_smoke": serving} if serving else {})}, indent=2))
    else:
        for check in report.checks:
            print(check.line())
        for run in report.smoke or []:
            print(smoke_line(run))
            for note in run["notes"]:  # each rank's devices and cores, the warm start's cache figures
                print(f"      {note}")
        if serving:
            from pipeline.serve import serving_smoke_line

            print(serving_smoke_line(serving))
        print("ready" if report.ok else "not ready: fix the lines above", file=sys.stderr)
    return 0 if report.ok else 1
