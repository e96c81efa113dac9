"""The fleet ledger read while instances still append to it."""

from __future__ import annotations

import json
from pathlib import Path

from anarchon_conformance.ledger import read_ledger


def test_a_line_still_being_written_is_left_for_the_next_read(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    whole = [{"e": "start", "slot": 1}, {"e": "end", "slot": 1}]
    text = "".join(json.dumps(r) + "\n" for r in whole)
    path.write_text(text + '{"e": "start", "slo')  # a read that ends inside an append (a CI failure)
    assert read_ledger(path) == whole
    path.write_text(text)
    assert read_ledger(path) == whole
    assert read_ledger(tmp_path / "none.jsonl") == []
