"""Bad input to every command is one line on stderr and a non-zero exit, found before any work (issue 48.5).

One table over the commands: each row is a command line with one wrong input (a count out of range, a file where a
folder is expected, a folder that is missing, an output path that cannot be written, a file nested too deeply to
read, a number of 5,000 digits). Each must end with a non-zero exit, exactly one line on stderr, no traceback, the
files given unchanged and nothing new written; the stage that would do the work (a sweep, a benchmark, a Hub
call) is replaced by a tripwire, so an input let through to the work fails here instead of running it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from pipeline.cli import main
from tests import ROOT

SHA = "0" * 64
REV = "0123456789abcdef0123456789abcdef01234567"
BIG = "1" + "0" * 30  # 10^30
HUGE = "9" * 5000  # more digits than int() reads


class WorkStarted(Exception):
    """The command went on to its work with a wrong input."""


def _tripwire(*args: object, **kwargs: object) -> None:
    raise WorkStarted("the command started its work")


class _Hub:
    """A Hub client whose first call is work."""

    def __getattr__(self, name: str) -> object:
        raise WorkStarted(f"the command called the Hub ({name})")


#: Where each command's work begins: what a wrong input must never reach.
WORK = (
    "pipeline.serve.local.serve_model",
    "pipeline.serve.local.resolve_hub",
    "pipeline.bench.bench_model",
    "pipeline.cli.demo.run_demo",
    "pipeline.space.write_site",
    "pipeline.cli.registry.make_hub",
    "pipeline.cli.stages.make_hub",
    "pipeline.cli.check.make_hub",
    "pipeline.cli.warm.make_hub",
    "pipeline.cli.data.make_hub",
    "pipeline.cli.tools.make_hub",
    "pipeline.cli.serving.make_hub",
    "pipeline.localhub.serve",
    "pipeline.publish.warm_check",
)

SERVE = ["serve", "{model}"]
DIFF = ["diff", "--toolchain", "{old}", "{new}", "--dataset", "{dataset}"]
WARM_QUEUE = ["warm-queue", "--dataset", "{dataset}", "--out", "{tmp}/wq"]
WARM_CHECK = ["warm-check", "{record}", "--model", "{model}"]
WARM_PUBLISH = ["warm-publish", "{dir}", "--queue", "{queue}", "--to-folder", "{tmp}/wp"]
CHECK = ["check", "acme/model", "--dataset-dir", "{dataset}"]
BENCH = ["bench", "{model}", "--task", "text-generation", "--device", "cpu", "--out", "{tmp}/r.json"]
QUEUE = ["queue", "--candidates", "{candidates}", "--dataset", "{dataset}"]

#: (id, argv): each a command line with one wrong input.
CASES: list[tuple[str, list[str]]] = [
    # serve: counts
    ("serve-chips-negative", [*SERVE, "--chips", "-1"]),
    ("serve-chips-zero", [*SERVE, "--chips", "0"]),
    ("serve-chips-10^30", [*SERVE, "--chips", BIG]),
    ("serve-chips-5000-digits", [*SERVE, "--chips", HUGE]),
    ("serve-chips-word", [*SERVE, "--chips", "two"]),
    ("serve-instance-chips-zero", [*SERVE, "--instance-chips", "0"]),
    ("serve-instance-chips-below-chips", [*SERVE, "--chips", "4", "--instance-chips", "2"]),
    ("serve-group-zero", [*SERVE, "--group", "0"]),
    ("serve-group-negative", [*SERVE, "--group", "-2"]),
    ("serve-ttft-negative", [*SERVE, "--ttft-s", "-1"]),
    ("serve-ttft-nan", [*SERVE, "--ttft-s", "nan"]),
    ("serve-ttft-inf", [*SERVE, "--ttft-s", "inf"]),
    ("serve-tok-s-zero", [*SERVE, "--tok-s-per-user", "0"]),
    ("serve-eval-floor-nan", [*SERVE, "--eval", "trncat-tiny-arith", "--eval-floor", "nan"]),
    ("serve-eval-floor-above-1", [*SERVE, "--eval", "trncat-tiny-arith", "--eval-floor", "7"]),
    ("serve-concurrency-zero", [*SERVE, "--concurrency", "0"]),
    ("serve-concurrency-descending", [*SERVE, "--concurrency", "4,2"]),
    # serve: paths
    ("serve-out-a-folder", [*SERVE, "--out", "{dir}"]),
    ("serve-out-under-a-file", [*SERVE, "--out", "{file}/serving.json"]),
    ("serve-out-empty", [*SERVE, "--out", ""]),
    ("serve-work-a-file", [*SERVE, "--work", "{file}"]),
    ("serve-work-under-a-file", [*SERVE, "--work", "{file}/work"]),
    ("serve-model-missing", ["serve", "{tmp}/no-such-model"]),
    ("serve-model-a-file", ["serve", "{file}"]),
    ("serve-model-no-config", ["serve", "{dir}"]),
    ("serve-warm-from-missing", [*SERVE, "--device", "neuron", "--warm-from", "{tmp}/none.tar.gz", "--sha256", SHA]),
    ("serve-warm-from-a-folder", [*SERVE, "--device", "neuron", "--warm-from", "{dir}", "--sha256", SHA]),
    ("serve-sha256-short", [*SERVE, "--sha256", "abc"]),
    ("serve-prices-missing", [*SERVE, "--prices", "{tmp}/none.yaml"]),
    ("serve-prices-a-folder", [*SERVE, "--prices", "{dir}"]),
    ("serve-prices-nested", [*SERVE, "--prices", "{nested_yaml}"]),
    ("serve-revision-not-hex", [*SERVE, "--revision", "main"]),
    ("serve-device-neuron-without-vllm", [*SERVE, "--device", "neuron"]),
    ("serve-device-cuda-without-vllm", [*SERVE, "--device", "cuda"]),
    # diff
    ("diff-dataset-missing", [*DIFF[:4], "--dataset", "{tmp}/no-dataset"]),
    ("diff-dataset-a-file", [*DIFF[:4], "--dataset", "{file}"]),
    ("diff-dataset-empty-folder", [*DIFF[:4], "--dataset", "{dir}"]),
    ("diff-toolchain-missing", ["diff", "--toolchain", "{tmp}/none.yaml", "{new}", "--dataset", "{dataset}"]),
    ("diff-toolchain-a-folder", ["diff", "--toolchain", "{dir}", "{new}", "--dataset", "{dataset}"]),
    ("diff-toolchain-5000-digit-pin", ["diff", "--toolchain", "{old}", "{huge_pin}", "--dataset", "{dataset}"]),
    ("diff-toolchain-nested", ["diff", "--toolchain", "{old}", "{nested_yaml}", "--dataset", "{dataset}"]),
    ("diff-toolchain-not-utf8", ["diff", "--toolchain", "{old}", "{binary}", "--dataset", "{dataset}"]),
    ("diff-toolchain-the-same", ["diff", "--toolchain", "{old}", "{old}", "--dataset", "{dataset}"]),
    ("diff-write-dataset-missing", [*DIFF[:4], "--dataset", "{tmp}/no-dataset", "--write"]),
    # warm-queue
    ("warm-queue-limit-zero", [*WARM_QUEUE, "--limit", "0"]),
    ("warm-queue-limit-negative", [*WARM_QUEUE, "--limit", "-5"]),
    ("warm-queue-limit-10^30", [*WARM_QUEUE, "--limit", BIG]),
    ("warm-queue-limit-5000-digits", [*WARM_QUEUE, "--limit", HUGE]),
    ("warm-queue-dataset-missing", ["warm-queue", "--dataset", "{tmp}/none", "--out", "{tmp}/wq"]),
    ("warm-queue-dataset-a-file", ["warm-queue", "--dataset", "{file}", "--out", "{tmp}/wq"]),
    ("warm-queue-out-a-file", ["warm-queue", "--dataset", "{dataset}", "--out", "{file}"]),
    ("warm-queue-out-under-a-file", ["warm-queue", "--dataset", "{dataset}", "--out", "{file}/wq"]),
    # warm-check
    ("warm-check-record-missing", ["warm-check", "{tmp}/none.json", "--model", "{model}"]),
    ("warm-check-record-a-folder", ["warm-check", "{dir}", "--model", "{model}"]),
    ("warm-check-record-nested", ["warm-check", "{nested_json}", "--model", "{model}"]),
    ("warm-check-record-not-json", ["warm-check", "{file}", "--model", "{model}"]),
    ("warm-check-sha256-short", [*WARM_CHECK, "--sha256", "xyz"]),
    ("warm-check-out-a-folder", [*WARM_CHECK, "--out", "{dir}"]),
    ("warm-check-out-under-a-file", [*WARM_CHECK, "--out", "{file}/warm.json"]),
    ("warm-check-model-missing", ["warm-check", "{record}", "--model", "{tmp}/no-model"]),
    # warm-publish
    ("warm-publish-to-folder-a-file", [*WARM_PUBLISH[:4], "--to-folder", "{file}"]),
    ("warm-publish-to-folder-under-a-file", [*WARM_PUBLISH[:4], "--to-folder", "{file}/ds"]),
    ("warm-publish-downloaded-missing", ["warm-publish", "{tmp}/none", *WARM_PUBLISH[2:]]),
    ("warm-publish-downloaded-a-file", ["warm-publish", "{file}", *WARM_PUBLISH[2:]]),
    ("warm-publish-queue-missing", ["warm-publish", "{dir}", "--queue", "{tmp}/none.json", *WARM_PUBLISH[4:]]),
    ("warm-publish-queue-a-folder", ["warm-publish", "{dir}", "--queue", "{dir}", *WARM_PUBLISH[4:]]),
    ("warm-publish-queue-nested", ["warm-publish", "{dir}", "--queue", "{nested_json}", *WARM_PUBLISH[4:]]),
    ("warm-publish-queue-not-json", ["warm-publish", "{dir}", "--queue", "{file}", *WARM_PUBLISH[4:]]),
    # check
    ("check-dataset-dir-missing", ["check", "acme/model", "--dataset-dir", "{tmp}/none"]),
    ("check-dataset-dir-a-file", ["check", "acme/model", "--dataset-dir", "{file}"]),
    ("check-model-id-bad", ["check", "not a model id", "--dataset-dir", "{dataset}"]),
    ("check-model-id-traversal", ["check", "../../etc", "--dataset-dir", "{dataset}"]),
    ("check-revision-bad", [*CHECK, "--revision", "../x"]),
    ("check-run-py-a-folder", [*CHECK, "--run-py", "{dir}"]),
    ("check-run-py-under-a-file", [*CHECK, "--run-py", "{file}/run.py"]),
    ("check-instance-unknown", [*CHECK, "--instance", "trn9.huge"]),
    # bench
    ("bench-iterations-zero", [*BENCH, "--iterations", "0"]),
    ("bench-warmup-negative", [*BENCH, "--warmup", "-1"]),
    ("bench-cores-zero", [*BENCH, "--cores", "0"]),
    ("bench-cores-10^30", [*BENCH, "--cores", BIG]),
    ("bench-timeout-zero", [*BENCH, "--timeout", "0"]),
    ("bench-timeout-nan", [*BENCH, "--timeout", "nan"]),
    ("bench-memory-limit-negative", [*BENCH, "--memory-limit-gb", "-1"]),
    ("bench-host-memory-negative", [*BENCH, "--host-memory-bytes", "-1"]),
    ("bench-host-memory-wait-negative", [*BENCH, "--host-memory-wait", "-3"]),
    ("bench-workload-no-equals", [*BENCH, "--workload", "input_tokens"]),
    ("bench-out-a-folder", [*BENCH[:-1], "{dir}"]),
    ("bench-out-under-a-file", [*BENCH[:-1], "{file}/r.json"]),
    # queue
    ("queue-chunk-size-zero", [*QUEUE, "--chunk-size", "0"]),
    ("queue-chunk-negative", [*QUEUE, "--chunk", "-1"]),
    ("queue-max-error-retries-negative", [*QUEUE, "--max-error-retries", "-1"]),
    ("queue-target-hours-zero", [*QUEUE, "--target-hours", "0"]),
    ("queue-target-hours-nan", [*QUEUE, "--target-hours", "nan"]),
    ("queue-candidates-missing", ["queue", "--candidates", "{tmp}/none.json", "--dataset", "{dataset}"]),
    ("queue-candidates-nested", ["queue", "--candidates", "{nested_json}", "--dataset", "{dataset}"]),
    ("queue-dataset-a-file", ["queue", "--candidates", "{candidates}", "--dataset", "{file}"]),
    ("queue-out-a-folder", [*QUEUE, "--out", "{dir}"]),
    ("queue-estimate-under-a-file", [*QUEUE, "--estimate", "{file}/cost.json"]),
    # the rest
    ("discover-limit-zero", ["discover", "--limit", "0"]),
    ("discover-limit-negative", ["discover", "--limit", "-1"]),
    ("discover-out-dir-a-file", ["discover", "--out-dir", "{file}"]),
    ("discover-selected-missing", ["discover", "--selected", "{tmp}/none.yaml"]),
    ("plan-batch-size-zero", ["plan", "{model}", "--batch-size", "0"]),
    ("plan-input-tokens-negative", ["plan", "{model}", "--input-tokens", "-1"]),
    ("plan-output-tokens-5000-digits", ["plan", "{model}", "--output-tokens", HUGE]),
    ("validate-nested", ["validate", "{nested_json}"]),
    ("build-out-a-file", ["build", "{record}", "--out", "{file}"]),
    (
        "collect-downloaded-missing",
        ["collect", "{tmp}/none", "--queue", "{queue}", "--run-id", "1", "--out", "{tmp}/c"],
    ),
    ("collect-queue-nested", ["collect", "{dir}", "--queue", "{nested_json}", "--run-id", "1", "--out", "{tmp}/c"]),
    ("collect-out-a-file", ["collect", "{dir}", "--queue", "{queue}", "--run-id", "1", "--out", "{file}"]),
    ("publish-to-folder-a-file", ["publish", "{record}", "--to-folder", "{file}"]),
    ("publish-overlay-missing", ["publish", "{record}", "--to-folder", "{tmp}/ds", "--overlay", "{tmp}/none"]),
    ("page-from-folder-a-file", ["page", "--dataset-repo", "a/b", "--from-folder", "{file}", "--out", "{tmp}/s"]),
    ("page-out-a-file", ["page", "--dataset-repo", "a/b", "--from-folder", "{dataset}", "--out", "{file}"]),
    ("localhub-port-negative", ["localhub", "serve", "--root", "{tmp}/hub", "--port", "-1"]),
    ("localhub-port-too-big", ["localhub", "serve", "--root", "{tmp}/hub", "--port", "70000"]),
    ("localhub-root-under-a-file", ["localhub", "serve", "--root", "{file}/hub"]),
    ("doctor-cores-zero", ["doctor", "--cores", "0"]),
    ("doctor-toolchain-nested", ["doctor", "--toolchain", "{nested_yaml}"]),
    ("release-watch-manifest-missing", ["release-watch", "--manifest", "{tmp}/none.json", "--source", "u"]),
    ("release-watch-manifest-nested", ["release-watch", "--manifest", "{nested_json}", "--source", "u"]),
    ("release-watch-root-missing", ["release-watch", "--manifest", "{file}", "--source", "u", "--root", "{tmp}/n"]),
    ("release-watch-body-a-folder", ["release-watch", "--manifest", "{file}", "--source", "u", "--body", "{dir}"]),
    ("demo-out-a-file", ["demo", "--out", "{file}"]),
    ("demo-work-under-a-file", ["demo", "--out", "{tmp}/demo", "--work", "{file}/w"]),
]


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}  # fmt: skip


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_inputs(tmp_path_factory.mktemp("bad-input"))


def make_inputs(tmp: Path) -> dict[str, Path]:
    """The files and folders the table's command lines name, made in ``tmp``."""
    from pipeline.dataset import build
    from tests.support.records import sample_record

    model = tmp / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama"}\n')
    (tmp / "afile").write_text("not json, not a folder\n")
    (tmp / "adir").mkdir()
    depth = 100_000
    (tmp / "nested.json").write_text("[" * depth + "]" * depth)
    (tmp / "nested.yaml").write_text("[" * depth + "]" * depth)
    (tmp / "binary.yaml").write_bytes(b"\xff\xfe\x00bad")
    toolchain = (ROOT / "runners" / "toolchain.yaml").read_text()
    (tmp / "old.yaml").write_text(toolchain.replace('transformers: "5.24.0"', 'transformers: "5.23.0"'))
    (tmp / "new.yaml").write_text(toolchain)
    (tmp / "huge.yaml").write_text(toolchain.replace('transformers: "5.24.0"', f"transformers: {HUGE}"))
    (tmp / "queue.json").write_text('{"include": []}\n')
    (tmp / "candidates.json").write_text(
        '{"date": "2026-12-01", "task": "text-generation", "view": "trending", "candidates": []}\n'
    )
    import json

    (tmp / "record.json").write_text(json.dumps(sample_record()) + "\n")
    build([sample_record()], tmp / "dataset")
    return {
        "tmp": tmp,
        "model": model,
        "file": tmp / "afile",
        "dir": tmp / "adir",
        "nested_json": tmp / "nested.json",
        "nested_yaml": tmp / "nested.yaml",
        "binary": tmp / "binary.yaml",
        "old": tmp / "old.yaml",
        "new": tmp / "new.yaml",
        "huge_pin": tmp / "huge.yaml",
        "queue": tmp / "queue.json",
        "candidates": tmp / "candidates.json",
        "record": tmp / "record.json",
        "dataset": tmp / "dataset",
    }


def run_case(argv: list[str], inputs: dict[str, Path]) -> tuple[int | None, str, BaseException | None]:
    """(exit code, stderr, the exception that escaped main: a traceback) of ``trncat argv``, its work tripwired."""
    import contextlib
    import io

    argv = [arg.format(**inputs) for arg in argv]
    err = io.StringIO()
    code: int | None
    escaped: BaseException | None = None
    with (
        pytest.MonkeyPatch.context() as patch,
        contextlib.redirect_stderr(err),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        for target in WORK:
            patch.setattr(target, _Hub if target.endswith("make_hub") else _tripwire, raising=False)
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException as exc:  # noqa: BLE001  (what would be a traceback)
            code, escaped = None, exc
    return code, err.getvalue(), escaped


@pytest.mark.parametrize("argv", [argv for _, argv in CASES], ids=[name for name, _ in CASES])
def test_a_wrong_input_is_one_line_and_a_non_zero_exit_before_any_work(
    argv: list[str], inputs: dict[str, Path]
) -> None:
    before = _tree(inputs["tmp"])
    code, err, escaped = run_case(argv, inputs)
    assert escaped is None, f"a traceback: {type(escaped).__name__}: {str(escaped)[:300]}"
    assert code not in (0, None), f"exit {code} on a wrong input; stderr: {err[:300]}"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err[:2000]
    assert len(lines[0]) <= 400, lines[0][:500]
    assert lines[0].startswith("error: ") or argv[0] == "validate", lines[0]  # validate: its verdict line
    assert _tree(inputs["tmp"]) == before  # nothing written, nothing lost
    assert not any(p.name in ("wq", "wp", "c", "s", "demo", "ds", "r.json", "hub") for p in inputs["tmp"].iterdir())


def test_the_table_is_as_wide_as_the_issue_s_count() -> None:
    assert len(CASES) >= 82 and len({name for name, _ in CASES}) == len(CASES)
    assert {argv[0] for _, argv in CASES} >= {"serve", "diff", "warm-queue", "warm-check", "warm-publish", "check"}


def count() -> None:
    """``python -m tests.cli.test_bad_input``: the table's inputs, and how many end in a traceback, went on to their
    work, exit 0, or say more (or less) than one line."""
    import collections
    import tempfile

    tally: collections.Counter[str] = collections.Counter()
    with tempfile.TemporaryDirectory() as tmp:
        inputs = make_inputs(Path(tmp))
        for name, argv in CASES:
            code, err, escaped = run_case(argv, inputs)
            kind = ("went on to its work" if isinstance(escaped, WorkStarted) else "traceback" if escaped
                    else "exit 0" if code == 0 else "not one line" if len(err.strip().splitlines()) != 1
                    else "one line, non-zero")  # fmt: skip
            tally[kind] += 1
            if kind != "one line, non-zero":
                print(f"{name}: {kind}" + (f" ({type(escaped).__name__})" if escaped else ""))
    print(f"{len(CASES)} inputs: " + ", ".join(f"{n} {k}" for k, n in tally.most_common()))


if __name__ == "__main__":
    count()
