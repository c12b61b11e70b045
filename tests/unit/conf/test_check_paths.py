"""conf/check_paths.py: dead repository paths in docs and comments, on a crafted tree."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "conf"))

from check_paths import dead_paths  # noqa: E402

FILES = {
    "pkg/mod.py": '"""Module doc: see tests/unit/test_gone.py and tests/unit/test_here.py."""\n'
                  "# pkg/mod.helper is defined; pkg/mod.nothing is not\n"
                  "def helper():\n"
                  '    """tests/unit/test_moved.py has its tests"""\n'
                  '    return "tests/unit/in_code_not_a_comment.py"\n',
    "tests/unit/test_here.py": "",
    "docs/page.md": "Run `tests/unit/test_here.py` and `tests/unit/test_*.py`; see [the other](other.md) and\n"
                    "[gone](missing.md#part), [site](https://example.org/x.md), ../shared/kafka/lib/x.jar,\n"
                    "/work/tests/elsewhere.py, `docs/<name>.md`, and tests/unit/old_file.py.\n",
    "docs/other.md": "",
    "CHANGELOG.md": "Removed tests/unit/test_gone.py.\n",
}


def make_tree(root: Path) -> list[str]:
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return list(FILES)


def test_dead_paths_in_docs_comments_and_docstrings_are_found(tmp_path):
    dead = {(d.file, d.line, d.path) for d in dead_paths(tmp_path, make_tree(tmp_path))}
    assert dead == {
        ("pkg/mod.py", 1, "tests/unit/test_gone.py"),
        ("pkg/mod.py", 2, "pkg/mod.nothing"),
        ("pkg/mod.py", 4, "tests/unit/test_moved.py"),
        ("docs/page.md", 2, "missing.md"),
        ("docs/page.md", 3, "tests/unit/old_file.py"),
    }

