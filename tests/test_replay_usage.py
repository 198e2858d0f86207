"""`console replay` on a file it cannot play says why and exits 2, before the console opens.

Run through the real command in a subprocess with a short timeout: a check that came too
late would open the live console and wait, and the timeout would catch it.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.receipts import make_receipt

CONSOLE = Path(sys.executable).parent / "console"
RECORDED = Path(__file__).parent / "data" / "recorded_round.jsonl"


def _replay(*args: str) -> subprocess.CompletedProcess:
    # stdin closed and no terminal: nothing here may wait for a person
    return subprocess.run([str(CONSOLE), "replay", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=30, env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"})


@pytest.mark.parametrize("name, content, says", [
    ("profile.json", json.dumps({"name": "demo", "reps": 3}), "is not a receipt this version can read: "
                                                              "unknown receipt schema None"),
    ("list.json", "[1, 2, 3]", "is not a receipt"),
    ("old-tool.json", json.dumps({"schema": "other-tool/receipt/1"}), "'other-tool/receipt/1'"),
    ("notes.txt", "a note, not a round\n", "neither a receipt nor a journal: not JSON"),
    ("empty.json", "", "neither a receipt nor a journal: not JSON"),
    ("empty.jsonl", "", "is not a journal"),
    ("ledger.jsonl", json.dumps({"receipt": "ab12", "prev": None}) + "\n", "is not a journal"),
    ("garbled.jsonl", "{not json\n{\"kind\": \"round_started\"}\n", "line 1 is not a JSON event"),
])
def test_a_file_that_is_neither_a_receipt_nor_a_journal_exits_2(tmp_path: Path, name, content, says):
    path = tmp_path / name
    path.write_text(content)
    proc = _replay(str(path))
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and "Give a sealed receipt" in proc.stderr
    assert proc.stdout == ""        # the console never opened


def test_a_missing_file_exits_2(tmp_path: Path):
    proc = _replay(str(tmp_path / "nope.json"))
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def test_a_directory_exits_2(tmp_path: Path):
    proc = _replay(str(tmp_path))
    assert proc.returncode == 2 and f"cannot read {tmp_path}" in proc.stderr


def test_follow_of_a_journal_not_yet_written_is_accepted_and_of_a_receipt_refused(tmp_path: Path):
    from console.errors import UsageError
    from console.reports.replay import check_replayable
    fresh = tmp_path / "live.jsonl"
    fresh.write_text('{"kind": "round_st')             # the first line, half written
    check_replayable(fresh, follow=True)
    with pytest.raises(UsageError, match="is not a journal"):
        check_replayable(fresh)                         # a replay needs a whole first event
    check_replayable(RECORDED)
    proc = _replay("--follow", str(tmp_path / "x.json"))
    assert proc.returncode == 2


def test_receipts_of_every_schema_pass_the_check_and_one_this_version_cannot_read_is_refused(tmp_path: Path):
    """A receipt replays only as the one reader of receipts reads it: a newer schema, or one without
    the rules to judge it by, is refused with the file and why, never shown dressed as readable."""
    from console.core.records.receipt import SCHEMAS
    from console.errors import UsageError
    from console.reports.replay import check_replayable
    for i, schema in enumerate(SCHEMAS):
        path = tmp_path / f"r{i}.json"
        path.write_text(json.dumps(make_receipt(schema=schema)))
        check_replayable(path)
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps(make_receipt(schema="bench-console/receipt/99")))
    with pytest.raises(UsageError, match=f"{newer} is not a receipt this version can read: unknown receipt schema "
                                         "'bench-console/receipt/99'"):
        check_replayable(newer)
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"schema": SCHEMAS[-1], "round_id": "x"}))
    with pytest.raises(UsageError, match="records no gate rules"):
        check_replayable(bare)
