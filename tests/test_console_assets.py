"""The console's embedded files (Sources/GroupdConsole/ConsoleAssets.swift) match its sources in
Sources/GroupdConsole/Assets (scripts/genconsole.py --check), and the check notices an edit."""
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def check(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(root / "scripts" / "genconsole.py"), "--check"],
                          cwd=root, capture_output=True, text=True, timeout=60)


def test_committed_console_assets_are_fresh():
    result = check(ROOT)
    assert result.returncode == 0, "ConsoleAssets.swift is stale; run `make console`:\n" + result.stdout + result.stderr


def test_check_reports_an_edited_asset(tmp_path):
    for rel in ["scripts/genconsole.py", "Sources/GroupdConsole"]:
        src, dst = ROOT / rel, tmp_path / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
    assert check(tmp_path).returncode == 0
    script = tmp_path / "Sources/GroupdConsole/Assets/console.js"
    script.write_text(script.read_text() + "// edited\n")
    result = check(tmp_path)
    assert result.returncode == 1
    assert "stale: Sources/GroupdConsole/ConsoleAssets.swift" in result.stdout


def test_raw_literals_survive_delimiters_in_the_assets(tmp_path):
    """An asset holding `"#` and `\\#` (as console.js does with "#/group/") still round-trips: the
    literal takes more hashes than any run in the text."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import genconsole
    finally:
        sys.path.pop(0)
    text = 'a "#/x" and \\## and """ end'
    literal = genconsole.raw_literal(text)
    assert literal.startswith('###"""\n') and literal.endswith('\n"""###')
