"""Foundation: provenance helpers, registry and CLI error handling."""

import hashlib
import json

import pytest

from bench import cli
from bench.errors import BenchError
from bench.provenance import atomic_write_bytes, make_manifest, sha256_file, staged_output_dir
from bench.registry import Registry


def test_sha256_matches_hashlib(tmp_path):
    data = bytes(range(256)) * 1000
    path = tmp_path / "blob.bin"
    path.write_bytes(data)
    # golden: hashlib over the whole buffer at once (independent of the chunked reader)
    assert sha256_file(path, chunk_bytes=1000) == hashlib.sha256(data).hexdigest()


def test_atomic_write_leaves_nothing_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "out.bin"
    atomic_write_bytes(target, b"old")

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", boom)
    with pytest.raises(OSError):
        atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


def test_staged_output_dir_refuses_existing_and_cleans_up(tmp_path):
    out = tmp_path / "bundle"
    out.mkdir()
    with pytest.raises(BenchError, match="--overwrite"):
        with staged_output_dir(out, overwrite=False):
            pass
    with pytest.raises(RuntimeError):
        with staged_output_dir(tmp_path / "new", overwrite=False) as tmp:
            (tmp / "half.ply").write_bytes(b"x")
            raise RuntimeError("editor failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]
    with staged_output_dir(out, overwrite=True) as tmp:
        (tmp / "a.txt").write_text("a")
    assert (out / "a.txt").read_text() == "a"
    a_file = tmp_path / "notes.txt"
    a_file.write_text("keep me")
    with pytest.raises(BenchError, match="is a file, not a directory"):
        with staged_output_dir(a_file, overwrite=True):
            pass
    assert a_file.read_text() == "keep me"


def test_manifest_hashes_and_is_byte_stable(tmp_path):
    src = tmp_path / "in.ply"
    src.write_bytes(b"ply")
    kwargs = dict(tool="hole/1", params={"angle": 54.0}, seed=0, inputs={"background": src},
                  counts={"removed": 3})
    first, second = make_manifest(**kwargs), make_manifest(**kwargs)
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    assert first["inputs"]["background"]["sha256"] == hashlib.sha256(b"ply").hexdigest()
    assert first["counts"] == {"removed": 3} and first["tool"] == "hole/1"


def test_registry_suggests_close_names():
    reg = Registry("perturbation")
    reg.register("floaters", object(), mode="edit")
    reg.register("hole", object())
    with pytest.raises(ValueError, match="did you mean 'floaters'"):
        reg.get("floater")
    with pytest.raises(ValueError, match="already registered"):
        reg.register("hole", object())
    assert reg.entry("floaters").meta == {"mode": "edit"}


def test_cli_error_is_one_line_exit_2(tmp_path, capsys):
    code = cli.main(["scene", "info", str(tmp_path / "missing")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("bench scene") and "error:" in err and len(err.splitlines()) == 1


def test_read_json_errors_name_the_file_and_the_fix(tmp_path):
    from bench.provenance import read_json

    with pytest.raises(FileNotFoundError, match=r"plan .*none.json does not exist; make one"):
        read_json(tmp_path / "none.json", what="plan", fix="make one")
    (tmp_path / "bad.json").write_text('{"a": 1,}')
    with pytest.raises(BenchError, match=r"not valid JSON \(.* at line 1\); make one"):
        read_json(tmp_path / "bad.json", what="plan", fix="make one")
    (tmp_path / "latin.json").write_bytes(b'{"a": "\xe9"}')
    with pytest.raises(BenchError, match="not UTF-8"):
        read_json(tmp_path / "latin.json", what="plan", fix="make one")
    (tmp_path / "ok.json").write_text('{"a": [1, 2]}')
    assert read_json(tmp_path / "ok.json", what="plan", fix="-") == {"a": [1, 2]}


def test_cli_stops_quietly_when_the_reader_closes_the_pipe():
    import subprocess
    import sys

    script = (
        "import argparse, sys\n"
        "import bench.cli as cli\n"
        "def handler(args):\n"
        "    for _ in range(100000):\n"
        "        print('x' * 100)\n"
        "class Parser:\n"
        "    def parse_known_args(self, argv):\n"
        "        return argparse.Namespace(func=handler, command='info'), []\n"
        "cli.build_parser = Parser\n"
        "sys.exit(cli.main([]))\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    writer.stdout.read(10)
    writer.stdout.close()  # like `| head -c 10`
    err = writer.stderr.read().decode()
    assert writer.wait(timeout=60) == 141
    assert "Traceback" not in err


def test_cli_prints_warnings_on_one_line(monkeypatch, capsys):
    import argparse
    import warnings

    def handler(args):
        warnings.warn("table outside the scene bounds\nsecond line", UserWarning, stacklevel=1)
        return 0

    class Parser:  # bench.cli.main parses with parse_known_args (names unknown flags' owner)
        def parse_known_args(self, argv):
            return argparse.Namespace(func=handler, command="render"), []

    monkeypatch.setattr(cli, "build_parser", Parser)
    assert cli.main([]) == 0
    err = capsys.readouterr().err
    assert err == "bench render: warning: table outside the scene bounds\n"
