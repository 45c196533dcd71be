"""The generated protobuf-c C, Swift types and fixtures match Protos/ (scripts/genproto.py --check)."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GENPROTO = ROOT / "scripts" / "genproto.py"
# What genproto.py reads and writes, copied to a scratch tree for the staleness tests.
TREE = ["scripts/genproto.py", "Protos", "Sources/GroupProtoC", "Sources/GroupAPI/Generated",
        "Tests/GroupAPITests/Generated"]


def check(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(root / "scripts" / "genproto.py"), "--check"],
                          cwd=root, capture_output=True, text=True, timeout=300)


def test_committed_generated_files_are_fresh():
    result = check(ROOT)
    assert result.returncode == 0, (
        "generated files are stale; run `make protos`:\n" + result.stdout + result.stderr)


@pytest.fixture
def scratch(tmp_path):
    for rel in TREE:
        src, dst = ROOT / rel, tmp_path / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst)
        else:
            shutil.copy2(src, dst)
    assert check(tmp_path).returncode == 0
    return tmp_path


def test_check_reports_stale_missing_and_extra_files(scratch):
    swift = scratch / "Sources/GroupAPI/Generated/groupd_v1_common.pb.swift"
    swift.write_text(swift.read_text() + "// edited by hand\n")
    (scratch / "Sources/GroupProtoC/include/groupd/v1/event.pb-c.h").unlink()
    (scratch / "Sources/GroupProtoC/include/stray.h").write_text("/* not generated */\n")
    result = check(scratch)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert "stale: Sources/GroupAPI/Generated/groupd_v1_common.pb.swift" in lines
    assert "missing: Sources/GroupProtoC/include/groupd/v1/event.pb-c.h" in lines
    assert "extra: Sources/GroupProtoC/include/stray.h" in lines


def test_check_reports_a_proto_change(scratch):
    proto = scratch / "Protos/groupd/v1/common.proto"
    proto.write_text(proto.read_text().replace("  string face_url = 4;\n",
                                               "  string face_url = 4;\n  string motto = 5;\n"))
    result = check(scratch)
    assert result.returncode == 1
    stale = {line.split(": ", 1)[1] for line in result.stdout.splitlines() if line.startswith("stale: ")}
    assert "Sources/GroupAPI/Generated/groupd_v1_common.pb.swift" in stale
    assert "Sources/GroupProtoC/include/groupd/v1/common.pb-c.h" in stale
    assert "Tests/GroupAPITests/Generated/Examples.swift" in stale


def test_regeneration_repairs_the_tree(scratch):
    (scratch / "Sources/GroupAPI/Generated/AllServices.swift").unlink()
    (scratch / "Sources/GroupAPI/Generated/Extra.swift").write_text("// stray\n")
    result = subprocess.run([sys.executable, str(scratch / "scripts/genproto.py")], cwd=scratch,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert check(scratch).returncode == 0
    assert not (scratch / "Sources/GroupAPI/Generated/Extra.swift").exists()


def test_check_covers_the_embedded_descriptor_set(scratch):
    """descriptor_set.c (what server reflection answers from) is generated and checked like the rest."""
    embedded = scratch / "Sources/GroupProtoC/descriptor_set.c"
    embedded.write_text(embedded.read_text().replace("0x0a,", "0x0b,", 1))
    result = check(scratch)
    assert result.returncode == 1
    assert "stale: Sources/GroupProtoC/descriptor_set.c" in result.stdout.splitlines()
    proto = scratch / "Protos/groupd/v1/common.proto"
    proto.write_text(proto.read_text().replace("  string face_url = 4;\n", "  string face_url = 4;\n  string motto = 5;\n"))
    subprocess.run([sys.executable, str(scratch / "scripts/genproto.py")], cwd=scratch, check=True,
                   capture_output=True, timeout=300)
    assert b"motto" in embedded_bytes(scratch)


def embedded_bytes(root: Path) -> bytes:
    """The bytes of the descriptor set in descriptor_set.c."""
    import re

    text = (root / "Sources/GroupProtoC/descriptor_set.c").read_text()
    body = text[text.index("= {") + 3:text.index("};")]
    return bytes(int(x, 16) for x in re.findall(r"0x([0-9a-f]{2})", body))


def test_embedded_descriptor_set_holds_every_proto_and_its_imports():
    from google.protobuf import descriptor_pb2

    fds = descriptor_pb2.FileDescriptorSet.FromString(embedded_bytes(ROOT))
    names = [f.name for f in fds.file]
    ours = sorted(str(p.relative_to(ROOT / "Protos")) for p in (ROOT / "Protos").rglob("*.proto"))
    assert set(ours) <= set(names)
    assert "google/protobuf/timestamp.proto" in names and "google/protobuf/field_mask.proto" in names
    for index, f in enumerate(fds.file):
        assert not f.HasField("source_code_info"), f.name
        for dependency in f.dependency:
            assert names.index(dependency) < index, f"{f.name} before its import {dependency}"


def test_recursive_messages_are_refused(scratch):
    proto = scratch / "Protos/groupd/v1/common.proto"
    proto.write_text(proto.read_text() + "\nmessage Loop { Loop next = 1; }\n")
    result = check(scratch)
    assert result.returncode == 2
    assert "recursive message types are not supported: groupd.v1.Loop -> groupd.v1.Loop" in result.stderr


def test_proto3_optional_is_refused(scratch):
    proto = scratch / "Protos/groupd/v1/common.proto"
    proto.write_text(proto.read_text() + "\nmessage Opt { optional string x = 1; }\n")
    result = check(scratch)
    assert result.returncode == 2
    assert "proto3 `optional` is not supported" in result.stderr


def test_every_groupd_element_is_documented():
    """Every message, field, oneof, enum, enum value, service and RPC of groupd.v1 has a comment."""
    import importlib.util
    import tempfile

    spec = importlib.util.spec_from_file_location("genproto", GENPROTO)
    genproto = importlib.util.module_from_spec(spec)
    sys.modules["genproto"] = genproto
    spec.loader.exec_module(genproto)
    with tempfile.TemporaryDirectory() as tmp:
        model = genproto.Model(genproto.descriptor_set(genproto.proto_sources(), Path(tmp)))

    def documented(comments):
        return bool(comments.leading.strip() or comments.trailing.strip())

    missing = []
    for fi in model.files:
        if not fi.name.startswith("groupd/"):
            continue
        enums = list(fi.enums)
        for m in model.all_messages(fi):
            if m.is_map_entry:
                continue
            enums += m.nested_enums
            if not documented(m.comments):
                missing.append(m.full_name)
            missing += [f"{m.full_name}.{f.name}" for f in m.fields if not documented(f.comments)]
            missing += [f"{m.full_name}.{o.name}" for o in m.oneofs if not documented(o.comments)]
        for e in enums:
            if not documented(e.comments):
                missing.append(e.full_name)
            missing += [f"{e.full_name}.{v.name}" for v in e.values if not documented(v.comments)]
        for s in fi.services:
            if not documented(s.comments):
                missing.append(s.full_name)
            missing += [f"{s.full_name}.{m.name}" for m in s.methods if not documented(m.comments)]
    assert not missing, "undocumented: " + ", ".join(missing)
