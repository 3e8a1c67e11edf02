"""A record file is UTF-8 or refused: never decoded with replacements, never read as UTF-16 (issue 29.18)."""

from __future__ import annotations

import json

import pytest

from pipeline.records import check_file, dump_record, parse_record
from tests.support.records import sample_record


@pytest.mark.parametrize(
    "encode",
    [
        lambda text: text.encode("utf-16"),  # json.loads(bytes) took UTF-16 and UTF-32 as they come
        lambda text: text.encode("utf-32"),
        lambda text: text.replace('"notes": []', '"notes": ["\udcff"]').encode("utf-8", "surrogatepass"),
        lambda text: text.replace('"notes": []', '"notes": ["caf\xe9"]').encode("latin-1"),
    ],
    ids=["utf-16", "utf-32", "a lone surrogate's bytes", "latin-1"],
)
def test_a_record_that_is_not_utf8_is_refused(tmp_path, encode) -> None:
    text = dump_record(sample_record(notes=[]))
    assert '"notes": []' in text
    path = tmp_path / "r.json"
    path.write_bytes(encode(text))
    record, problems = check_file(path)
    assert record is None and [(p.field, p.message.split(":")[0]) for p in problems] == [("(json)", "not UTF-8")]
    with pytest.raises(ValueError):
        parse_record(path.read_bytes())


def test_a_utf8_record_with_any_text_still_passes(tmp_path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(sample_record(notes=["café ✓ 模型"]), ensure_ascii=False), encoding="utf-8")
    record, problems = check_file(path)
    assert problems == [] and record is not None and record["notes"] == ["café ✓ 模型"]
