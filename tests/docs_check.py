#!/usr/bin/env python3
"""The project's Markdown cannot rot silently (docs/testing.md, "The documentation's own test").

    python3 tests/docs_check.py               check the checkout this file lies in
    python3 tests/docs_check.py --root DIR    check another tree (what the self-test does)
    python3 tests/docs_check.py --self-test   feed the checker broken links and snippets, and
                                              fail unless it finds each of them

Every Markdown file of the tree is read (target/, fuzz/corpus/, fuzz/target/, vendor/,
node_modules/ and dot-directories left out). Two things are checked:

- Every relative link, inline `[text](path#anchor)`, image or reference definition
  `[id]: path`, outside code: the path must exist, and an anchor must be a heading of the file
  it points to (GitHub's slugs: lower case, punctuation dropped, spaces as hyphens, `-1`, `-2`
  for repeats) or an explicit `<a name>`/`id`. Links with a scheme (`https:`, `mailto:`) are
  not followed.
- Every fenced code block right after a marker line `<!-- runnable: LANG -->` (or
  `<!-- runnable: LANG run -->`) is extracted and checked against the built library
  (target/release): `c` is compiled as C11 with the project's warnings as errors, linked with
  -lslotpartner and run when it has a `main`; `cpp` likewise as C++17 with the C++ binding;
  `php` (`php -l`), `python` (`py_compile`) and `sh` (`bash -n`) are syntax-checked, and run
  when the marker says `run`. Runs happen in the tree's root with the library found through
  SLOTPARTNER_LIB, PYTHONPATH=bindings/python and the PHP binding's autoload.
- A marker that ends `copy-of FILE` (`<!-- runnable: php copy-of bindings/php/README.md -->`)
  says the block is a copy of a runnable block of FILE, where a test runs it: the copy must be
  the same, byte for byte, so that the two cannot drift apart.

Each problem is one line `FILE:LINE: what`, then the closing line `docs: N passed, N failed`;
the exit status is 1 when anything failed. Python 3.11 standard library only.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

SKIPPED_DIRS = {"target", "vendor", "node_modules"}
SKIPPED_PATHS = {("fuzz", "corpus"), ("fuzz", "target"), ("fuzz", "artifacts")}
LANGUAGES = {"c", "cpp", "php", "python", "sh"}
SNIPPET_SECONDS = 120
STRICT = ["-Wall", "-Wextra", "-Werror", "-pedantic"]

MARKER = re.compile(r"^\s*<!--\s*runnable:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s{0,3})(`{3,}|~{3,})(.*)$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HTML_ANCHOR = re.compile(r"<a\s+[^>]*(?:name|id)\s*=\s*\"([^\"]+)\"", re.IGNORECASE)
CODE_SPAN = re.compile(r"(`+)(?:.+?)\1")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
HAS_MAIN = re.compile(r"\bint\s+main\s*\(")


@dataclass
class Snippet:
    path: Path
    line: int  # the line of the opening fence
    language: str
    run: bool
    code: str
    copy_of: str | None = None  # a Markdown file that must hold the same block, verbatim


@dataclass
class Document:
    path: Path
    slugs: set[str]
    links: list[tuple[int, str]]  # (line, target)
    snippets: list[Snippet]
    problems: list[tuple[int, str]]  # found while reading (a marker without its block)


def markdown_files(root: Path) -> list[Path]:
    found = []
    for directory, subdirs, files in os.walk(root):
        here = Path(directory).relative_to(root)
        subdirs[:] = sorted(
            d
            for d in subdirs
            if not d.startswith(".") and d not in SKIPPED_DIRS and (here.parts + (d,))[-2:] not in SKIPPED_PATHS
        )
        found += [Path(directory) / f for f in sorted(files) if f.endswith(".md")]
    return found


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def read_document(path: Path) -> Document:
    slugs: set[str] = set()
    seen: dict[str, int] = {}
    links: list[tuple[int, str]] = []
    snippets: list[Snippet] = []
    problems: list[tuple[int, str]] = []
    lines = path.read_text(encoding="utf-8").split("\n")
    fence: str | None = None
    block: list[str] = []
    pending: tuple[int, str, bool, str | None] | None = None  # a marker waiting for its block
    open_snippet: tuple[int, str, bool, str | None] | None = None
    for number, line in enumerate(lines, 1):
        if fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
                if open_snippet is not None:
                    start, language, run, copy_of = open_snippet
                    snippets.append(Snippet(path, start, language, run, "\n".join(block) + "\n", copy_of))
                fence, block, open_snippet = None, [], None
            else:
                block.append(line)
            continue
        opening = FENCE.match(line)
        if opening and not (opening.group(2)[0] == "`" and "`" in opening.group(3)):
            fence = opening.group(2)
            if pending is not None:
                open_snippet = (number, pending[1], pending[2], pending[3])
                pending = None
            continue
        if pending is not None:
            problems.append((pending[0], "runnable marker not followed by a fenced code block on the next line"))
            pending = None
        marker = MARKER.match(line)
        if marker:
            words = marker.group(1).split()
            copy_of = None
            if len(words) >= 3 and words[-2] == "copy-of":
                copy_of, words = words[-1], words[:-2]
            if not words or words[0] not in LANGUAGES or words[1:] not in ([], ["run"]):
                problems.append(
                    (number, f"bad runnable marker {line.strip()!r}: expected <!-- runnable: LANG [run] [copy-of FILE] --> with LANG one of {', '.join(sorted(LANGUAGES))}")
                )
            else:
                pending = (number, words[0], words[1:] == ["run"], copy_of)
            continue
        for anchor in HTML_ANCHOR.findall(line):
            slugs.add(anchor)
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            slugs.add(base if count == 0 else f"{base}-{count}")
        definition = REFERENCE_DEF.match(line)
        if definition:
            links.append((number, definition.group(1)))
            continue
        prose = CODE_SPAN.sub("", line)
        for target in INLINE_LINK.findall(prose):
            links.append((number, target))
    if pending is not None:
        problems.append((pending[0], "runnable marker not followed by a fenced code block on the next line"))
    if fence is not None and open_snippet is not None:
        problems.append((open_snippet[0], "runnable code block never closed"))
    return Document(path, slugs, links, snippets, problems)


def check_link(root: Path, document: Document, target: str, documents: dict[Path, Document]) -> str | None:
    """None when the link holds, else what is wrong with it."""
    if not target or SCHEME.match(target) or target.startswith("//"):
        return None
    path_part, _, anchor = target.partition("#")
    if path_part.startswith("/"):
        destination = root / path_part.lstrip("/")
    elif path_part:
        destination = document.path.parent / path_part
    else:
        destination = document.path
    destination = Path(os.path.normpath(destination))
    if not destination.exists():
        return f"broken link {target!r}: {os.path.relpath(destination, root)} does not exist"
    if anchor:
        if destination.is_dir() or destination.suffix != ".md":
            return None  # GitHub's line anchors (#L10) and the like: not checked
        if destination not in documents:
            documents[destination] = read_document(destination)
        if anchor not in documents[destination].slugs:
            return f"broken link {target!r}: no heading #{anchor} in {os.path.relpath(destination, root)}"
    return None


def run(command: list[str], cwd: Path, env: dict[str, str]) -> str | None:
    """None when the command succeeded, else its output's last lines."""
    try:
        done = subprocess.run(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=SNIPPET_SECONDS
        )
    except subprocess.TimeoutExpired:
        return f"{command[0]} did not end within {SNIPPET_SECONDS} s"
    except FileNotFoundError:
        return f"{command[0]} is not installed"
    if done.returncode == 0:
        return None
    output = (done.stdout + done.stderr).strip().split("\n")
    return f"{' '.join(command[:1])} exited {done.returncode}: " + "\n    ".join(output[-15:])


def check_copy(root: Path, snippet: Snippet) -> str | None:
    """None when the file the snippet says it copies holds the same block (a test runs that one)."""
    source = root / snippet.copy_of
    if not source.is_file():
        return f"copy-of {snippet.copy_of}: no such file"
    if not any(other.code == snippet.code for other in read_document(source).snippets):
        return f"copy-of {snippet.copy_of}: the block differs from every runnable block there (copy it again)"
    return None


def check_snippet(root: Path, snippet: Snippet, scratch: Path) -> str | None:
    if snippet.copy_of is not None and (drifted := check_copy(root, snippet)) is not None:
        return drifted
    release = (root / "target" / "release").resolve()
    env = dict(os.environ)
    env["SLOTPARTNER_LIB"] = str(release / "libslotpartner.so")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root / "bindings" / "python"), env.get("PYTHONPATH")]))
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(release), env.get("LD_LIBRARY_PATH")]))
    name = f"snippet_{snippet.line}"
    if snippet.language in ("c", "cpp"):
        source = scratch / (name + (".c" if snippet.language == "c" else ".cpp"))
        source.write_text(snippet.code)
        if snippet.language == "c":
            compiler = [os.environ.get("CC", "cc"), "-std=c11", *STRICT, f"-I{root / 'include'}"]
        else:
            compiler = [
                os.environ.get("CXX", "c++"), "-std=c++17", *STRICT, f"-I{root / 'bindings' / 'cpp'}", f"-I{root / 'include'}"
            ]
        if not HAS_MAIN.search(snippet.code):
            return run([*compiler, "-c", str(source), "-o", str(scratch / (name + ".o"))], root, env)
        program = scratch / name
        failed = run([*compiler, str(source), "-o", str(program), f"-L{release}", "-lslotpartner", f"-Wl,-rpath,{release}"], root, env)
        return failed or run([str(program)], root, env)
    if snippet.language == "php":
        source = scratch / (name + ".php")
        code = snippet.code if snippet.code.lstrip().startswith("<?php") else "<?php\n" + snippet.code
        source.write_text(code)
        failed = run(["php", "-l", str(source)], root, env)
        if failed or not snippet.run:
            return failed
        autoload = root / "bindings" / "php" / "autoload.php"
        return run(["php", "-d", "ffi.enable=1", "-d", f"auto_prepend_file={autoload}", str(source)], root, env)
    if snippet.language == "python":
        source = scratch / (name + ".py")
        source.write_text(snippet.code)
        failed = run([sys.executable, "-c", "import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)", str(source), str(scratch / (name + ".pyc"))], root, env)
        return failed or (run([sys.executable, str(source)], root, env) if snippet.run else None)
    source = scratch / (name + ".sh")
    source.write_text(snippet.code)
    failed = run(["bash", "-n", str(source)], root, env)
    return failed or (run(["bash", "-e", str(source)], root, env) if snippet.run else None)


def check(root: Path, out=sys.stdout) -> int:
    """Checks the tree; prints each problem and the closing line; returns how many failed."""
    root = root.resolve()
    documents = {path: read_document(path) for path in markdown_files(root)}
    passed = failed = 0

    def report(path: Path, line: int, problem: str | None) -> None:
        nonlocal passed, failed
        if problem is None:
            passed += 1
        else:
            failed += 1
            print(f"{os.path.relpath(path, root)}:{line}: {problem}", file=out)

    with tempfile.TemporaryDirectory(prefix="docs-check-") as scratch:
        for document in list(documents.values()):
            for line, problem in document.problems:
                report(document.path, line, problem)
            for line, target in document.links:
                report(document.path, line, check_link(root, document, target, documents))
            for snippet in document.snippets:
                problem = check_snippet(root, snippet, Path(scratch))
                report(snippet.path, snippet.line, None if problem is None else f"{snippet.language} snippet failed: {problem}")
    print(f"docs: {passed} passed, {failed} failed", file=out)
    return failed


SELF_TEST_GOOD = """# A page

## Choices, named: `sp_x` & more

See [the other page](other.md#the-heading), [this one](#choices-named-sp_x--more), [a folder](sub/),
[the web](https://example.invalid/missing) and `[not a link](nowhere.md)`.

[ref]: other.md

<!-- runnable: sh run -->
```sh
test "$(echo ok)" = ok
```

<!-- runnable: python -->
```python
import os
print(undefined_name)  # compiled, not run
```

<!-- runnable: c run -->
```c
#include "slotpartner.h"
int main(void) { return sp_version() == 0; }
```

```sh
this block is not marked, and is never run (
```
"""

SELF_TEST_BROKEN = {
    "a missing file": "[gone](missing.md)",
    "a missing anchor": "[gone](other.md#no-such-heading)",
    "a missing anchor of its own page": "[gone](#nowhere)",
    "a missing reference target": "[ref]: missing/",
    "a C snippet that does not compile": "<!-- runnable: c -->\n```c\nint f(void) { return undeclared; }\n```",
    "a C program that fails": "<!-- runnable: c -->\n```c\nint main(void) { return 3; }\n```",
    "a shell snippet that fails when run": "<!-- runnable: sh run -->\n```sh\nfalse\n```",
    "a shell snippet that does not parse": "<!-- runnable: sh -->\n```sh\nif then fi (\n```",
    "a Python snippet that does not compile": "<!-- runnable: python -->\n```python\ndef f(:\n```",
    "a marker without its block": "<!-- runnable: sh -->\n\nsome text",
    "a marker of an unknown language": "<!-- runnable: cobol -->\n```cobol\nDISPLAY 'X'.\n```",
    "a copy that drifted from its original": "<!-- runnable: sh copy-of other.md -->\n```sh\ntrue\n```",
}


def self_test(repository: Path) -> int:
    """Builds small trees and checks that the checker passes the good one and fails each broken one."""
    failures = 0
    with tempfile.TemporaryDirectory(prefix="docs-check-self-") as scratch:

        def tree(name: str, readme: str) -> Path:
            root = Path(scratch) / name
            (root / "sub").mkdir(parents=True)
            (root / "other.md").write_text("# Other\n\n## The heading\n")
            (root / "README.md").write_text(readme)
            (root / "include").symlink_to(repository / "include")
            (root / "target").mkdir()
            (root / "target" / "release").symlink_to(repository / "target" / "release")
            return root

        output = _Capture()
        if check(tree("good", SELF_TEST_GOOD), output) != 0:
            failures += 1
            print("docs self-test: the good tree failed:\n" + output.text, end="")
        for index, (what, text) in enumerate(SELF_TEST_BROKEN.items()):
            output = _Capture()
            found = check(tree(f"broken{index}", SELF_TEST_GOOD + "\n" + text + "\n"), output)
            if found != 1 or "README.md:" not in output.text:
                failures += 1
                print(f"docs self-test: {what} was not found once (found {found}):\n{output.text}", end="")
    print(f"docs self-test: {1 + len(SELF_TEST_BROKEN) - failures} passed, {failures} failed")
    return failures


class _Capture:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> None:
        self.text += text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--self-test", action="store_true", help="check that the checker finds broken links and snippets")
    arguments = parser.parse_args()
    if not shutil.which("bash"):
        print("docs: bash is needed", file=sys.stderr)
        return 2
    if arguments.self_test:
        return 1 if self_test(arguments.root.resolve()) else 0
    return 1 if check(arguments.root) else 0


if __name__ == "__main__":
    sys.exit(main())
