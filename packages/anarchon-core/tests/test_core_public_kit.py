"""Backends, the dashboard and the benchmarks are written with the public kit: no private name of the core.

A third party writes a backend with what ``anarchon.backend`` and the other
public modules offer; the first-party ones must be writable the same way, or
the kit is incomplete. A private module is one whose name (or a package's on
the way to it) starts with an underscore.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
USERS = [
    *(f"packages/{manifest.parent.name}/src" for manifest in sorted(ROOT.glob("packages/*/backend.toml"))),
    "packages/anarchon-web/src",
    "packages/anarchon-prometheus/src",
    "packages/anarchon-opentelemetry/src",
    "benchmarks",
]


def _private_imports(folder: Path) -> list[str]:
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] == "anarchon" and any(p.startswith("_") for p in parts[1:]):
                    found.append(f"{path.name}:{node.lineno}: {name}")
    return found


@pytest.mark.parametrize("folder", USERS)
def test_no_private_core_module_is_imported(folder: str) -> None:
    assert (ROOT / folder).is_dir()
    found = _private_imports(ROOT / folder)
    assert not found, f"private core modules imported (use anarchon.backend and the public modules): {found}"


def test_the_check_sees_a_private_import(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("from anarchon._window import ClaimWindow\nimport anarchon.cli._common\n")
    assert len(_private_imports(tmp_path)) == 2
