#!/usr/bin/env python3
"""The committed fuzz inputs, kept as text.

The repository holds text files only. A seed (Tests/Fuzz/Corpus/<target>/) or regression input
(Tests/Fuzz/Regressions/<target>/) that is printable UTF-8 is stored as it is; any other input is
stored base64-encoded as `<name>.b64`. libFuzzer reads raw files, so scripts/fuzz.sh unpacks a
directory into a temporary one before a run.

  corpus.py unpack SRC DST        every input of SRC, raw, into DST (README.md skipped)
  corpus.py add DIR FILE [NAME]   FILE stored into DIR as NAME (default: FILE's name), encoded
                                  if it is not printable text
"""
import base64
import sys
from pathlib import Path

SUFFIX = ".b64"
SKIPPED = {"README.md"}


def is_text(data: bytes) -> bool:
    """Printable UTF-8: tabs and newlines allowed, no other control character, no carriage return."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(ch in "\t\n" or (ch >= " " and ch != "\x7f") for ch in text)


def store(directory: Path, name: str, data: bytes) -> Path:
    """Writes `data` into `directory` as `name`, or as `name.b64` when it is not printable text."""
    directory.mkdir(parents=True, exist_ok=True)
    if is_text(data) and not name.endswith(SUFFIX):
        path = directory / name
        path.write_bytes(data)
    else:
        path = directory / (name + SUFFIX)
        path.write_text(base64.encodebytes(data).decode("ascii"))
    return path


def load(path: Path) -> tuple[str, bytes]:
    """An input's name and raw bytes."""
    if path.name.endswith(SUFFIX):
        return path.name[: -len(SUFFIX)], base64.b64decode(path.read_text(), validate=False)
    return path.name, path.read_bytes()


def unpack(source: Path, destination: Path) -> int:
    destination.mkdir(parents=True, exist_ok=True)
    count = 0
    for path in sorted(source.iterdir()) if source.is_dir() else []:
        if path.name in SKIPPED or not path.is_file():
            continue
        name, data = load(path)
        (destination / name).write_bytes(data)
        count += 1
    return count


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "unpack":
        print(unpack(Path(argv[1]), Path(argv[2])))
        return 0
    if len(argv) in (3, 4) and argv[0] == "add":
        file = Path(argv[2])
        print(store(Path(argv[1]), argv[3] if len(argv) == 4 else file.name, file.read_bytes()))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
