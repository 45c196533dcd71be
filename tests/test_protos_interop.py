"""Swift's encodings (GroupAPI over protobuf-c) parsed by python's google.protobuf.

The Swift test `CrossCheckTests/exportEncodings` writes the encoding of every generated example
when GROUPAPI_EXPORT_ENCODINGS names a file; this test runs it, parses each encoding with classes
built from the same descriptors, and compares with the example built in python.
"""
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load_genproto():
    spec = importlib.util.spec_from_file_location("genproto", ROOT / "scripts" / "genproto.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["genproto"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(shutil.which("swift") is None, reason="needs the Swift toolchain")
def test_python_parses_swift_encodings(tmp_path):
    out = tmp_path / "encodings.txt"
    env = dict(os.environ, GROUPAPI_EXPORT_ENCODINGS=str(out))
    result = subprocess.run(["swift", "test", "--filter", "CrossCheckTests"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    lines = out.read_text().splitlines()

    genproto = load_genproto()
    with tempfile.TemporaryDirectory() as tmp:
        fds = genproto.descriptor_set(genproto.proto_sources(), Path(tmp))
    model = genproto.Model(fds)
    classes = genproto.python_classes(fds)
    writer = genproto.ExampleWriter(model, classes)
    messages = {m.full_name: m for m in model.every_message() if not m.is_map_entry}
    expected_count = sum(genproto.example_variants(m) for m in messages.values())
    assert len(lines) == expected_count

    for line in lines:
        name, variant, hexdata = (line.split(" ") + [""])[:3]
        data = bytes.fromhex(hexdata)
        parsed = classes[name]()
        parsed.ParseFromString(data)
        expected = writer.py_message(messages[name], int(variant))
        assert parsed == expected, f"{name}#{variant}: python parsed {parsed} from Swift's bytes"
        # Nothing Swift wrote was left unrecognised, and re-encoding gives the same bytes.
        assert parsed.SerializeToString(deterministic=True) == data, f"{name}#{variant}"
