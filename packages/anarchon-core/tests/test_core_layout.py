"""The size rule of ARCHITECTURE.md as a test (the import rules are contracts that ``make lint`` checks).

A newcomer who wants to change one behaviour should find one file of about a
hundred lines; 500 is the ceiling for the core and for every backend, with no
exception, and every backend has the same module for the same role.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CEILING = 500
#: The core and every backend (each folder with a manifest).
SOURCES = ["anarchon-core", *(manifest.parent.name for manifest in sorted(ROOT.glob("packages/*/backend.toml")))]


def _modules() -> dict[str, int]:
    found = {}
    for package in SOURCES:
        for path in sorted((ROOT / "packages" / package / "src").rglob("*.py")):
            found[str(path.relative_to(ROOT / "packages"))] = len(path.read_text(encoding="utf-8").splitlines())
    return found


def test_every_module_of_the_core_and_the_backends_keeps_under_the_ceiling() -> None:
    modules = _modules()
    assert len(modules) > 50, "the walk found too few modules to mean anything"
    over = {name: lines for name, lines in modules.items() if lines > CEILING}
    assert not over, f"modules over {CEILING} lines: {over}; split them by role (ARCHITECTURE.md)"


#: Names a role once had; none may come back.
RETIRED = {"_backend.py": "backend.py", "_liveness.py": "_heart.py", "_keys.py": "_names.py",
           "_replication.py": "_replicas.py", "_history.py": "_records.py"}  # fmt: skip


@pytest.mark.parametrize("package", SOURCES[1:])
def test_every_backend_names_its_roles_alike(package: str) -> None:
    source = next((ROOT / "packages" / package / "src").glob("anarchon_*"))
    names = {p.name for p in source.glob("*.py")}
    assert {"backend.py", "_plugin.py"} <= names, f"{package}: the class module is backend.py, the hook _plugin.py"
    retired = sorted(names & set(RETIRED))
    assert not retired, f"{package}: {retired} use a retired name; the role's module is {[RETIRED[r] for r in retired]}"
    classes = (source / "backend.py").read_text()
    for module, mixin in (("_control.py", "ControlMixin"), ("_backfill.py", "BackfillMixin")):
        if module in names:
            assert f"class {mixin}" in (source / module).read_text(), f"{package}/{module} defines {mixin}"
            assert mixin in classes, f"{package}: the backend class mixes {mixin} in, as every backend does"


_STORE_CODE = re.compile(
    r"\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|WITH)\s|.*redis\.call\(|\s*local \w+ *=", re.S
)


@pytest.mark.parametrize("package", SOURCES[1:])
def test_store_code_lives_in_resource_files(package: str) -> None:
    """SQL and Lua are files (``sql/``, ``lua/``) in every backend, read with importlib.resources, never strings."""
    inline = []
    for path in sorted((ROOT / "packages" / package / "src").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _STORE_CODE.match(node.value):
                inline.append(f"{path.name}:{node.lineno}: {node.value.strip()[:60]!r}")
    assert not inline, f"{package}: store code inline; move it to a resource file: {inline}"
