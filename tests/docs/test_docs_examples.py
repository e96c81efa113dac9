"""Every Python example in the docs and the READMEs runs, so none goes stale unseen.

Sybil reads each Markdown file's ```python blocks and runs them in order in one
namespace per file, as a reader would paste them one after the other. A block
that cannot run here (it serves forever, or needs a host, framework or process
this test does not have) is marked in the Markdown, invisibly on the rendered
page, with ``<!-- skip: next "why" -->``; a skip without a reason fails, and a
skipped block must still compile.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import unittest
from collections.abc import Iterable
from pathlib import Path
from types import CodeType

import pytest
from sybil import Document, Example, Region, Sybil
from sybil.parsers.markdown import CodeBlockParser, SkipParser

ROOT = Path(__file__).resolve().parents[2]


def _compile(source: str, where: str) -> CodeType:
    return compile(source, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)


def _evaluate(example: Example) -> None:
    """Run a block as a reader would paste it into ``python -m asyncio``: top-level ``await`` allowed.

    A block that only includes a file (``--8<-- "examples/recipes/flask_app.py"``)
    is that file, which its own tests run (tests/recipes): it is skipped here.
    """
    if str(example.parsed).lstrip().startswith("--8<--"):
        raise unittest.SkipTest("an included file, run by its own tests")
    code = _compile(str(example.parsed), f"{example.path}:{example.line}")
    outcome = eval(code, example.namespace)
    if inspect.iscoroutine(outcome):
        asyncio.run(outcome)


class _PythonBlocks(CodeBlockParser):
    """```python blocks, also those with MkDocs attributes (```python title="app.py")."""

    def __call__(self, document: Document) -> Iterable[Region]:
        for region in self.lexers(document):
            if str(region.lexemes["arguments"]).split(maxsplit=1)[:1] == ["python"]:
                region.parsed = region.lexemes["source"]
                region.evaluator = _evaluate
                yield region


SYBIL = Sybil(parsers=[_PythonBlocks(language="python"), SkipParser()])
#: Markdown that is a record, not a page a user follows.
NOT_EXAMPLES = ("CHANGELOG.md", "benchmarks/results/", "chaos/results/")


def _pages() -> list[Path]:
    pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "packages").glob("*/README.md")]
    return sorted(p for p in pages if "```python" in p.read_text(encoding="utf-8"))


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_pages_python_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = page.read_text(encoding="utf-8")
    bare = re.findall(r"<!--\s*skip:\s*next\s*-->", text)
    assert not bare, f'{page.relative_to(ROOT)}: a skip without a reason; write <!-- skip: next "why" -->'
    monkeypatch.chdir(tmp_path)  # examples that make a SQLite file make it here
    monkeypatch.delenv("ANARCHON_BACKEND", raising=False)
    ran = skipped = 0
    for example in SYBIL.parse(page):
        try:
            example.evaluate()
        except unittest.SkipTest:
            # Not run here, but still Python: a skipped block that no longer parses fails too.
            _compile(str(example.parsed), f"{page}:{example.line}")
            skipped += 1
            continue
        except Exception as exc:
            raise AssertionError(f"{page.relative_to(ROOT)}, line {example.line}: the example fails: {exc!r}") from exc
        ran += 1
    assert ran + skipped > 0
