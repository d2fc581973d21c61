"""The code cites only what the repository holds: every ``docs/…``, ``tests/…`` and ``benchmarks/…`` path
mentioned in ``spillway/**/*.py`` exists, and no citation of design notes kept elsewhere (``spec 07``,
``§7.3``, ``shared/spec``) is left — the format facts live in ``docs/format/``."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]

# A repository-relative path: starts at a top-level directory (not inside a longer path or word) and ends
# on a name character, so trailing punctuation (``docs/api.md.``, ``(docs/x.md)``) is not part of it.
PATH = re.compile(r"(?<![\w./-])((?:docs|tests|benchmarks)/[\w./-]*[\w-])")
# Citations of documents that are not in the repository.
FOREIGN = re.compile(r"\bspec\s+\d+|§|shared/spec", re.IGNORECASE)


def _sources(root: Path) -> list[Path]:
    return sorted((root / "spillway").rglob("*.py"))


def cited_paths(root: Path) -> list[tuple[str, int, str]]:
    """(file, line, path) for every repository path mentioned in the package's sources under ``root``."""
    found = []
    for src in _sources(root):
        for n, line in enumerate(src.read_text(encoding="utf-8").splitlines(), 1):
            for m in PATH.finditer(line):
                found.append((str(src.relative_to(root)), n, m.group(1)))
    return found


def broken_paths(root: Path) -> list[str]:
    return [f"{src}:{n}: {path}" for src, n, path in cited_paths(root) if not (root / path).exists()]


def foreign_citations(root: Path) -> list[str]:
    return [
        f"{src.relative_to(root)}:{n}: {line.strip()}"
        for src in _sources(root)
        for n, line in enumerate(src.read_text(encoding="utf-8").splitlines(), 1)
        if FOREIGN.search(line)
    ]


def test_the_package_cites_documents() -> None:
    cited = {path for _, _, path in cited_paths(ROOT)}
    assert any(p.startswith("docs/format/") for p in cited), "no docs/format citation found: is the scan broken?"


def test_every_cited_path_exists() -> None:
    assert broken_paths(ROOT) == [], "spillway cites paths that are not in the repository"


def test_no_citation_of_documents_outside_the_repository() -> None:
    assert foreign_citations(ROOT) == [], "cite docs/format/<topic>.md instead"


def test_a_broken_citation_is_caught(tmp_path: Path) -> None:
    pkg = tmp_path / "spillway" / "formats"
    pkg.mkdir(parents=True)
    (tmp_path / "docs" / "format").mkdir(parents=True)
    (tmp_path / "docs" / "format" / "metadata.md").write_text("# metadata\n")
    (pkg / "ok.py").write_text('"""Layouts (docs/format/metadata.md, "Header")."""\n')
    (pkg / "bad.py").write_text(
        '"""Chunks (docs/format/gone.md), see also tests/unit/test_gone.py.\n\nRules: spec 05 §5.2."""\n'
    )
    assert broken_paths(tmp_path) == [
        "spillway/formats/bad.py:1: docs/format/gone.md",
        "spillway/formats/bad.py:1: tests/unit/test_gone.py",
    ]
    assert foreign_citations(tmp_path) == ['spillway/formats/bad.py:3: Rules: spec 05 §5.2."""']
    (pkg / "bad.py").unlink()
    assert broken_paths(tmp_path) == [] and foreign_citations(tmp_path) == []
