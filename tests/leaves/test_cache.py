"""kit.cache: entries keyed by content, damaged entries rebuilt with a note, no temporary
leftovers."""

from __future__ import annotations

import hashlib
import json

import pytest

from kit.cache import (
    CacheRebuilt,
    cached_file,
    content_key,
    file_digest,
    meta_path,
    read_entry,
    write_entry,
)


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"first model")
    return path


class Builder:
    """Writes the source's content, upper-cased; counts its calls."""

    def __init__(self, source):
        self.source, self.calls = source, 0

    def __call__(self, out):
        self.calls += 1
        out.write_bytes(self.source.read_bytes().upper())
        return {"note": "built"}


def build(tmp_path, source, builder, **settings):
    return cached_file(
        tmp_path / "cache",
        "model-fp16",
        ".onnx",
        sources=[source],
        settings={"method": "fp16", **settings},
        build=builder,
    )


def leftovers(directory):
    return sorted(p.name for p in directory.rglob("*tmp*"))


def test_built_once_then_reused(tmp_path, source):
    builder = Builder(source)
    first = build(tmp_path, source, builder)
    assert build(tmp_path, source, builder) == first and builder.calls == 1
    assert first.read_bytes() == b"FIRST MODEL"
    meta = json.loads(meta_path(first).read_text())
    assert meta["artifact_bytes"] == len(b"FIRST MODEL") and meta["note"] == "built"
    assert meta["sources"][0]["sha256"] == file_digest(source)


def test_key_follows_content_not_path(tmp_path, source):
    builder = Builder(source)
    first = build(tmp_path, source, builder)
    source.write_bytes(b"a different, much heavier model")  # same path, new content
    second = build(tmp_path, source, builder)
    assert second != first and builder.calls == 2
    assert second.read_bytes() == b"A DIFFERENT, MUCH HEAVIER MODEL"
    copy = tmp_path / "elsewhere.onnx"
    copy.write_bytes(source.read_bytes())
    assert content_key([copy], {"a": 1}) == content_key([source], {"a": 1})


def test_settings_are_part_of_the_key(tmp_path, source):
    builder = Builder(source)
    assert build(tmp_path, source, builder, batches=4) != build(
        tmp_path, source, builder, batches=8
    )
    assert builder.calls == 2


def test_directory_sources_hash_every_file(tmp_path):
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"w1")
    before = content_key([weights])
    (weights / "model.safetensors").write_bytes(b"w2")
    assert content_key([weights]) != before


@pytest.mark.parametrize(
    "damage, reason",
    [
        (
            lambda art: meta_path(art).write_text('{"artifact_bytes": 11, "sett'),
            "unreadable metadata",
        ),
        (lambda art: meta_path(art).unlink(), "no metadata"),
        (lambda art: art.write_bytes(art.read_bytes()[:4]), "truncated"),
        (
            lambda art: art.write_bytes(b"OTHER MODEL"),
            r"has content sha256 .* was written \(replaced\)",
        ),
        (lambda art: art.unlink(), "no file"),
    ],
)
def test_damaged_entry_is_rebuilt_with_a_note(tmp_path, source, damage, reason):
    builder = Builder(source)
    artifact = build(tmp_path, source, builder)
    damage(artifact)
    with pytest.warns(CacheRebuilt, match=reason):
        again = build(tmp_path, source, builder)
    assert again == artifact and builder.calls == 2
    assert again.read_bytes() == b"FIRST MODEL" and read_entry(again) is not None


def test_failed_build_leaves_nothing(tmp_path, source):
    def failing(out):
        out.write_bytes(b"half a model")
        out.with_suffix(".pre.onnx").write_bytes(b"scratch")
        raise RuntimeError("converter crashed")

    with pytest.raises(RuntimeError, match="converter crashed"):
        build(tmp_path, source, failing)
    assert list((tmp_path / "cache").iterdir()) == []
    builder = Builder(source)
    assert build(tmp_path, source, builder).exists() and builder.calls == 1


def test_entry_metadata_written_atomically(tmp_path):
    artifact = tmp_path / "model.onnx"
    artifact.write_bytes(b"123")
    write_entry(artifact, {"a": 1})
    assert json.loads(meta_path(artifact).read_text()) == {
        "a": 1,
        "artifact_bytes": 3,
        "artifact_sha256": hashlib.sha256(b"123").hexdigest(),
    }
    with pytest.raises(TypeError):
        write_entry(artifact, {"a": object()})
    assert json.loads(meta_path(artifact).read_text())["a"] == 1 and leftovers(tmp_path) == []
