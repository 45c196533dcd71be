#!/usr/bin/env python3
"""Builds the documentation of every Swift module of Sources/ with DocC and fails on any warning:
a symbol link (``Name``) that names nothing (a renamed or removed declaration, or one of another
module), a parameter a doc comment's `- Parameters:` list leaves out, a malformed comment.

Needs the debug build (`swift build`): each module's symbol graph is extracted from its built
`.swiftmodule` with `swift-symbolgraph-extract` (at `internal` access: the debug build is made with
`-enable-testing`, so internal declarations and their comments are in it; a private declaration is
not, so comments name those as code, not as links), with the search paths and C module maps its
compile command used (read from `.build/debug.yaml`). `docc convert --warnings-as-errors` then
builds each module's documentation alone: a link into another module is a warning too, so comments
write such names as code (`GroupSettings.ownerQuit`).

    scripts/check_docs.py [--root PACKAGE] [MODULE ...]
        (default: this package, every Swift module under its Sources/)

Prints each failing module's diagnostics and exits 1 when any module has one; 0 otherwise.
`make test` runs it as its `docs` stage (`make docs-check`).
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def swift_modules(root: Path):
    """The modules of Sources/ written in Swift (a C target has no .swift file)."""
    return sorted(path.name for path in (root / "Sources").iterdir()
                  if path.is_dir() and any(path.rglob("*.swift")))


def compile_arguments(manifest: str, module: str):
    """The swiftc arguments of `module`'s debug compile command in the llbuild manifest."""
    match = re.search(r'^  "C\.' + re.escape(module) + r'-[^"]*-debug\.module":\n(?:    .*\n)*?    args: (\[.*\])$',
                      manifest, re.M)
    if match is None:
        raise SystemExit(f"check_docs: no debug compile command for {module} in .build/debug.yaml; "
                         "run `swift build` first")
    return json.loads(match.group(1))


def search_flags(arguments):
    """What symbol-graph extraction needs of a compile command: -target, the module search paths
    (-I) and the C flags (-Xcc: module maps, include paths)."""
    flags, index = [], 0
    while index < len(arguments):
        if arguments[index] in ("-I", "-target", "-Xcc") and index + 1 < len(arguments):
            flags += arguments[index:index + 2]
            index += 2
        else:
            index += 1
    return flags


def check(root: Path, module: str, arguments, work: Path):
    """(module, diagnostics text or "" when clean)."""
    graphs, output = work / "graphs" / module, work / "out" / module
    graphs.mkdir(parents=True)
    output.parent.mkdir(parents=True, exist_ok=True)
    extracted = subprocess.run(
        ["swift-symbolgraph-extract", "-module-name", module, "-minimum-access-level", "internal",
         "-skip-inherited-docs", "-output-dir", str(graphs)] + search_flags(arguments),
        capture_output=True, text=True)
    if extracted.returncode != 0:
        return module, f"swift-symbolgraph-extract failed ({extracted.returncode}):\n{extracted.stderr}{extracted.stdout}"
    converted = subprocess.run(
        ["docc", "convert", "--additional-symbol-graph-dir", str(graphs), "--fallback-display-name", module,
         "--fallback-bundle-identifier", f"groupd.{module}", "--output-path", str(output), "--warnings-as-errors"],
        capture_output=True, text=True, cwd=root)
    text = (converted.stderr + converted.stdout).strip()
    if converted.returncode != 0:
        return module, text or f"docc convert exited with {converted.returncode}"
    # A clean build may still print progress; only diagnostics count.
    diagnostics = [line for line in text.splitlines() if re.match(r"^(warning|error):", line)]
    return module, text if diagnostics else ""


def main():
    parser = argparse.ArgumentParser(description="DocC on each Swift module, warnings as errors")
    parser.add_argument("--root", type=Path, default=ROOT, help="the package (default: this one)")
    parser.add_argument("modules", nargs="*", help="the modules (default: every Swift module of Sources/)")
    options = parser.parse_args()
    root = options.root.resolve()
    manifest_path = root / ".build" / "debug.yaml"
    if not manifest_path.exists():
        raise SystemExit(f"check_docs: {manifest_path} is missing; run `swift build` first")
    manifest = manifest_path.read_text()
    modules = options.modules or swift_modules(root)
    arguments = {module: compile_arguments(manifest, module) for module in modules}
    work = Path(tempfile.mkdtemp(prefix="groupd-docs-"))
    failed = []
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
            for module, diagnostics in pool.map(lambda m: check(root, m, arguments[m], work), modules):
                if diagnostics:
                    failed.append(module)
                    count = len(re.findall(r"^(?:warning|error):", diagnostics, re.M))
                    print(f"--- {module}: {count} diagnostic(s)\n{diagnostics}\n")
                else:
                    print(f"{module}: clean")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failed:
        print(f"check_docs: documentation diagnostics in {len(failed)} of {len(modules)} modules: {', '.join(failed)}")
        return 1
    print(f"check_docs: {len(modules)} modules, no diagnostics")
    return 0


if __name__ == "__main__":
    sys.exit(main())
