"""The instruction-count guard of `make test` (scripts/bench_instructions.py): what it lets pass and
what it fails, on made-up counts (the counting itself runs in the `instructions` stage)."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import bench_instructions  # noqa: E402

BASE = {"health": 1000, "get_groups_info": 2000, "send_one": 3000, "create": 4000, "join": 5000}


def test_a_row_up_to_five_percent_above_its_baseline_passes():
    counts = {row: value * 105 // 100 for row, value in BASE.items()}
    assert bench_instructions.above_baseline(counts, BASE) == []


def test_a_row_more_than_five_percent_above_its_baseline_fails_alone():
    counts = dict(BASE, send_one=3151)
    assert bench_instructions.above_baseline(counts, BASE) == ["send_one"]


def test_a_row_below_its_baseline_passes():
    counts = dict(BASE, create=1)
    assert bench_instructions.above_baseline(counts, BASE) == []


def test_a_row_without_a_baseline_fails():
    baseline = {row: value for row, value in BASE.items() if row != "join"}
    assert bench_instructions.above_baseline(dict(BASE), baseline) == ["join"]


def test_the_committed_baseline_has_every_row_for_every_kind():
    baselines = json.loads((ROOT / "Benchmarks" / "instructions.json").read_text())
    assert set(baselines) == {"debug", "release", "release-postgres"}
    for kind, entry in baselines.items():
        assert entry["calls"] > 0, kind
        assert set(entry["rows"]) == set(bench_instructions.ROWS), kind
        assert all(value > 0 for value in entry["rows"].values()), kind


def test_a_check_against_a_file_without_the_builds_kind_refuses_to_run(tmp_path):
    baseline = tmp_path / "instructions.json"
    baseline.write_text(json.dumps({"release": {"calls": 10, "rows": BASE}}))
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_instructions.py"), str(ROOT / ".build" / "debug" / "groupd"),
         "--check", str(baseline)], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "has no debug baseline" in result.stderr
