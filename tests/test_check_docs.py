"""The documentation check of `make test` (scripts/check_docs.py), on a package of its own: a
comment with a symbol link that names nothing, or a parameter list that leaves one out, fails the
check and names the module, the file and the name; the same package with those comments mended
passes. (The `docs` stage runs the check on groupd's own modules.)"""
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECK = ROOT / "scripts" / "check_docs.py"

pytestmark = pytest.mark.sqlite_only("builds a package of its own: no server, one pass is enough")

MANIFEST = """// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "DocsProbe",
    targets: [
        .target(name: "Clean"),
        .target(name: "Stale", dependencies: ["Clean"]),
    ]
)
"""

CLEAN = """/// A counter (``Counter/add(_:)`` moves it).
public struct Counter {
    /// The count so far.
    public private(set) var value = 0

    public init() {}

    /// Adds `amount`.
    /// - Parameter amount: How much to add.
    public mutating func add(_ amount: Int) { value += amount }
}
"""

STALE = """import Clean

/// Doubles a counter (see ``Tally/increment(by:)``).
struct Doubler {
    /// The result of doubling.
    /// - Parameters:
    ///   - counter: The counter to double.
    func doubled(_ counter: Counter, times: Int) -> Int { counter.value * 2 * times }
}
"""

MENDED = """import Clean

/// Doubles a counter (see `Counter.add(_:)` of the Clean module, and ``doubled(_:times:)``).
struct Doubler {
    /// The result of doubling.
    /// - Parameters:
    ///   - counter: The counter to double.
    ///   - times: How many times.
    func doubled(_ counter: Counter, times: Int) -> Int { counter.value * 2 * times }
}
"""


def build(package: Path):
    result = subprocess.run(["swift", "build"], cwd=package, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def check(package: Path):
    return subprocess.run([sys.executable, str(CHECK), "--root", str(package)], capture_output=True, text=True)


@pytest.fixture
def package():
    directory = Path(tempfile.mkdtemp(prefix="groupd-docs-probe-"))
    (directory / "Package.swift").write_text(MANIFEST)
    for module, text in (("Clean", CLEAN), ("Stale", STALE)):
        (directory / "Sources" / module).mkdir(parents=True)
        (directory / "Sources" / module / f"{module}.swift").write_text(text)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def test_a_link_to_nothing_or_a_parameter_left_out_fails_the_check_and_mended_comments_pass(package):
    build(package)
    result = check(package)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Clean: clean" in output
    assert "--- Stale: 2 diagnostic(s)" in output
    assert "'Tally' doesn't exist" in output and "Sources/Stale/Stale.swift:3" in output
    assert "Parameter 'times' is missing documentation" in output
    assert "diagnostics in 1 of 2 modules: Stale" in output

    (package / "Sources" / "Stale" / "Stale.swift").write_text(MENDED)
    build(package)
    result = check(package)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "check_docs: 2 modules, no diagnostics" in result.stdout


def test_without_a_build_the_check_says_what_to_run(package):
    result = check(package)
    assert result.returncode != 0
    assert "run `swift build` first" in result.stdout + result.stderr
