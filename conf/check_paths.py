"""Lint: every repository path named in a doc or a comment exists.

A comment that points to ``tests/unit/<a test>.py`` after that file was deleted sends the
reader nowhere and hides that what it vouched for is gone. This finds, in the tracked Markdown
files and in the comments and docstrings of the tracked Python files, every path that starts
with one of the repository's own top-level directories (``tests/...``, ``spark_groupsource/...``,
``docs/...``), and every relative Markdown link, and fails naming each one that does not exist
in the work tree (``tests/helpers.wait_until``, a module's attribute, must be defined there). Paths with wildcards or placeholders (``test_conformance_*.py``, ``<name>``)
are patterns, not names, and are left alone; so is CHANGELOG.md (history may name what is
gone). ``make lint`` runs it: ``python conf/check_paths.py`` (exit 1 on a dead path).
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Files whose mentions are history, not references.
HISTORY = {"CHANGELOG.md"}
#: A path-like word: segments of name characters joined by "/", not preceded by a path character
#: (so ``../shared/kafka`` and ``/work/x`` are not read as ``shared/kafka`` or ``x``).
PATH = re.compile(r"(?<![\w./~$-])((?:[\w.-]+/)+[\w.-]*)")
#: A Markdown link's target (``[text](target)``).
LINK = re.compile(r"\]\(([^)\s]+)\)")
#: Characters that make a word a pattern or a placeholder rather than a name.
PATTERN_CHARS = set("*?{}<>[]$%")


@dataclass(frozen=True)
class DeadPath:
    file: str
    line: int
    path: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.path} does not exist"


def tracked_files(root: Path = ROOT) -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout
    return [f for f in out.splitlines() if (root / f).is_file()]


def top_level_dirs(files: list[str]) -> set[str]:
    return {f.split("/", 1)[0] for f in files if "/" in f}


def python_texts(source: str) -> list[tuple[int, str]]:
    """(first line, text) of every comment and docstring of a Python source."""
    out: list[tuple[int, str]] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                out.append((tok.start[0], tok.string))
        tree = ast.parse(source)
    except (SyntaxError, tokenize.TokenError):
        return out
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                out.append((body[0].lineno, body[0].value.value))
    return out


def candidates(text: str, tops: set[str]) -> list[tuple[int, str]]:
    """(line offset within ``text``, path) of every repository path the text names."""
    out = []
    for i, line in enumerate(text.splitlines()):
        for m in PATH.finditer(line):
            word = m.group(1).rstrip(".,:;")
            after = line[m.end():m.end() + 1]
            if not word or word.split("/", 1)[0] not in tops or after in PATTERN_CHARS:
                continue
            if PATTERN_CHARS & set(word):
                continue
            out.append((i, word))
    return out


def markdown_links(text: str) -> list[tuple[int, str]]:
    out = []
    for i, line in enumerate(text.splitlines()):
        for m in LINK.finditer(line):
            target = m.group(1).split("#", 1)[0]
            if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target) or PATTERN_CHARS & set(target):
                continue
            out.append((i, target))
    return out


def exists(root: Path, word: str) -> bool:
    """``word`` names a file or directory, or a module's attribute (``tests/helpers.wait_until``:
    tests/helpers.py defines ``wait_until``)."""
    if (root / word).exists():
        return True
    module, _, attr = word.rpartition(".")
    source = root / f"{module}.py"
    if not attr or not source.is_file():
        return False
    text = source.read_text(encoding="utf-8", errors="replace")
    return re.search(rf"^\s*(?:(?:async\s+)?def|class)\s+{re.escape(attr)}\b|^{re.escape(attr)}\s*[:=]",
                     text, re.M) is not None


def dead_paths(root: Path = ROOT, files: list[str] | None = None) -> list[DeadPath]:
    files = tracked_files(root) if files is None else files
    tops = top_level_dirs(files)
    dead: list[DeadPath] = []
    for f in files:
        if f in HISTORY or not f.endswith((".md", ".py")):
            continue
        source = (root / f).read_text(encoding="utf-8", errors="replace")
        texts = [(1, source)] if f.endswith(".md") else python_texts(source)
        for first, text in texts:
            for off, word in candidates(text, tops):
                if not exists(root, word):
                    dead.append(DeadPath(f, first + off, word))
            if f.endswith(".md"):
                for off, target in markdown_links(text):
                    if not (root / f).parent.joinpath(target).exists():
                        dead.append(DeadPath(f, first + off, target))
    return dead


def main() -> int:
    dead = dead_paths()
    for d in dead:
        print(d)
    if dead:
        print(f"{len(dead)} path(s) named in docs or comments do not exist: fix the reference (or the file)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
