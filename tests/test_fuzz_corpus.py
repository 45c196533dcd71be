"""The committed fuzz inputs (Tests/Fuzz/corpus.py): the repository holds text only, binary inputs as
base64 `<name>.b64`, and every fuzz target has seeds that unpack to what was stored."""

import importlib.util
import re
import subprocess

import pytest

from support import ROOT

FUZZ = ROOT / "Tests" / "Fuzz"


def load_corpus_module():
    spec = importlib.util.spec_from_file_location("fuzz_corpus", FUZZ / "corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


corpus = load_corpus_module()


def fuzz_targets():
    """The targets scripts/fuzz.sh runs."""
    match = re.search(r"^TARGETS=\(([^)]*)\)", (ROOT / "scripts" / "fuzz.sh").read_text(), re.M)
    assert match, "scripts/fuzz.sh lists no TARGETS"
    return match.group(1).split()


def test_every_tracked_file_is_text():
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    binary = [name for name in files.decode().split("\0")
              if name and (ROOT / name).is_file() and not corpus.is_text((ROOT / name).read_bytes())
              and (ROOT / name).stat().st_size > 0]
    assert binary == [], f"binary files in the repository (store fuzz inputs with Tests/Fuzz/corpus.py add): {binary}"


@pytest.mark.parametrize("target", fuzz_targets())
def test_every_target_has_seeds_that_unpack(target, tmp_path):
    stored = [p for p in (FUZZ / "Corpus" / target).iterdir() if p.is_file()]
    assert stored, f"no seeds for {target}"
    assert corpus.unpack(FUZZ / "Corpus" / target, tmp_path) == len(stored)
    for path in stored:
        if path.name.endswith(".b64"):
            raw = (tmp_path / path.name[:-4]).read_bytes()
            assert not corpus.is_text(raw), f"{path.name} is printable text: store it as it is"
        else:
            assert (tmp_path / path.name).read_bytes() == path.read_bytes()


def test_store_keeps_text_and_encodes_the_rest(tmp_path):
    inputs = {
        "yaml": b"apps:\n  - id: demo\n\tx: 1\n",
        "frame": b"\x00\x00\x00\x00\x05hello",
        "crlf": b"GET / HTTP/1.1\r\n",
        "latin1": "caf\u00e9".encode("latin-1"),
        "utf8": "caf\u00e9 \u7fa4".encode(),
        "empty": b"",
    }
    stored = {name: corpus.store(tmp_path / "in", name, data).name for name, data in inputs.items()}
    assert stored == {"yaml": "yaml", "frame": "frame.b64", "crlf": "crlf.b64", "latin1": "latin1.b64",
                      "utf8": "utf8", "empty": "empty"}
    for name in stored.values():
        assert corpus.is_text((tmp_path / "in" / name).read_bytes())
    assert corpus.unpack(tmp_path / "in", tmp_path / "out") == len(inputs)
    for name, data in inputs.items():
        assert (tmp_path / "out" / name).read_bytes() == data


def test_add_from_the_command_line(tmp_path):
    crash = tmp_path / "crash-0123"
    crash.write_bytes(b"\xff\x00\x01")
    out = subprocess.run(["python3", str(FUZZ / "corpus.py"), "add", str(tmp_path / "reg"), str(crash), "bad-flags"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("reg/bad-flags.b64")
    assert corpus.load(tmp_path / "reg" / "bad-flags.b64") == ("bad-flags", b"\xff\x00\x01")
    usage = subprocess.run(["python3", str(FUZZ / "corpus.py"), "pack"], capture_output=True, text=True)
    assert usage.returncode == 2 and "unpack SRC DST" in usage.stderr
