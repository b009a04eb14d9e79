#!/usr/bin/env python3
"""Keeps the front door honest (`make docs`, run by `make lint`). Standard library only.

Fails when, in README.md, docs/*.md, docs/design/*.md or tools/*/README.md:
- a path they name (a link, or a repository path like `shared/domain/src/sweep/`) does not exist;
- a `make <target>` they name has no rule in the Makefile;
when a target of the Makefile's .PHONY has no `## target:` doc (what `make help` prints),
when a function of template.yaml (AWS::Serverless::Function) is missing from the README's
function table (or the table names one the template does not have), or docs/settings.md is not
what tools/docs/settings.py renders from the template.

    python3 tools/docs/check.py              # the repository
    python3 tools/docs/check.py --self-test  # the check itself, on pages made to fail
"""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import settings  # noqa: E402  (the generator beside this file)

ROOT = Path(__file__).resolve().parents[2]
TOP_FOLDERS = ("functions", "shared", "tools", "tests", "events", "docs", ".ci")
TOP_FILES = ("template.yaml", "Makefile", "Cargo.toml", "Cargo.lock", "README.md", "clippy.toml")
PATH = re.compile(
    r"(?<![\w./$-])((?:%s)/[A-Za-z0-9_.<>{}*/-]*|(?:%s)(?![\w.-]))"
    % ("|".join(re.escape(f) for f in TOP_FOLDERS), "|".join(re.escape(f) for f in TOP_FILES))
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
SPAN = re.compile(r"`([^`\n]+)`")
MAKE = re.compile(r"(?<![\w-])make ([a-z][a-z0-9-]*)")


def pages(root: Path) -> list[Path]:
    found = [root / "README.md"]
    found += sorted((root / "docs").glob("*.md")) + sorted((root / "docs" / "design").glob("*.md"))
    found += sorted((root / "tools").glob("*/README.md"))
    return [p for p in found if p.exists()]


def code_parts(text: str) -> list[str]:
    """What is code in a page: backticked spans, and fenced blocks' lines up to a `#` comment."""
    parts, fenced = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            parts.append(line.split(" #", 1)[0])
        else:
            parts += SPAN.findall(line)
    return parts


def named_paths(text: str) -> set[str]:
    """Repository paths a page names (prose, code and links alike), without placeholders."""
    names = set()
    for match in PATH.findall(text):
        name = match.rstrip(".,;:)*")
        if any(mark in name for mark in "<>{}*") or "..." in name:
            continue
        names.add(name)
    return names


def span_paths(text: str) -> set[str]:
    """Path-like words in backticks outside the top folders' names (`domain/src/x.rs`, a stale
    path from before a move; `src/links.rs` beside a tool's README): a word with an inner `/`
    ending in a file extension or `/`. Generated folders (`.venv/`, `target/`, `.local/`,
    `.aws-sam/`) and routes (`/admin/...`) are not paths of the repository."""
    names = set()
    for span in SPAN.findall(text):
        for word in span.split():
            word = word.rstrip(".,;:)")
            if (
                "/" in word.rstrip("/")
                and re.search(r"(\.(rs|py|md|json|toml|yaml|txt|sh)|/)$", word)
                and not re.match(r"^([a-z]+:|[/.]|target/)", word)
                and not any(mark in word for mark in "<>{}*$=")
            ):
                names.add(word)
    return names


def make_rules(makefile: str) -> list[re.Pattern]:
    rules = []
    for line in makefile.split("\n"):
        if line.startswith(("\t", "#", " ")) or "$(" in line.split(":")[0]:
            continue
        match = re.match(r"^([A-Za-z0-9_%. -]+?)\s*:(?!=)", line)
        if match:
            for target in match.group(1).split():
                rules.append(re.compile("^" + re.escape(target).replace("%", ".+") + "$"))
    return rules


def template_functions(template: str) -> set[str]:
    """The folder under functions/ of every AWS::Serverless::Function."""
    found = set()
    for block in re.split(r"\n  (?=[A-Za-z0-9]+:\n)", template):
        if re.search(r"^    Type: AWS::Serverless::Function\s*$", block, re.M):
            uri = re.search(r"CodeUri: \.?/?functions/([a-z0-9-]+)", block)
            found.add(uri.group(1) if uri else block.split(":", 1)[0])
    return found


def table_functions(readme: str) -> set[str]:
    """The first column of the README's function table (the table whose header starts `| function`)."""
    names, inside = set(), False
    for line in readme.split("\n"):
        if line.startswith("| function"):
            inside = True
            continue
        if inside and not line.startswith("|"):
            break
        if inside:
            names.update(re.findall(r"`([a-z0-9-]+)`", line.split("|")[1]))
    return names


def problems(root: Path, texts: dict[str, str], makefile: str, template: str, stack: str) -> list[str]:
    found = []
    rules = make_rules(makefile)
    for name, text in texts.items():
        here = (root / name).parent
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            path = target.split("#", 1)[0]
            if path and not (here / path).exists():
                found.append(f"{name}: links to {target}, which does not exist")
        for path in sorted(named_paths(text) | span_paths(text)):
            if not ((root / path).exists() or (here / path).exists()):
                found.append(f"{name}: names {path}, which does not exist")
        targets = {target for part in code_parts(text) for target in MAKE.findall(part)}
        for target in sorted(targets):
            if not any(rule.match(target) for rule in rules):
                found.append(f"{name}: names `make {target}`, which the Makefile has no rule for")
    phony = re.search(r"^\.PHONY:((?:.*\\\n)*.*)$", makefile, re.M)
    documented = set(re.findall(r"^## ([A-Za-z%-]+):", makefile, re.M))
    for target in (phony.group(1).replace("\\", " ").split() if phony else []):
        if target not in documented:
            found.append(f"Makefile: `make {target}` has no `## {target}:` doc for `make help`")
    readme = texts.get("README.md", "")
    in_template, in_table = template_functions(template), table_functions(readme)
    for function in sorted(in_template - in_table):
        found.append(f"README.md: the function table leaves out {function} (template.yaml has it)")
    for function in sorted(in_table - in_template):
        found.append(f"README.md: the function table names {function}, which template.yaml does not have")
    page = root / "docs" / "settings.md"
    if not page.exists() or page.read_text() != settings.render(template, stack):
        found.append("docs/settings.md is stale: run `python3 tools/docs/settings.py`")
    return found


def repository(root: Path) -> tuple[dict[str, str], str, str, str]:
    texts = {str(p.relative_to(root)): p.read_text() for p in pages(root)}
    return (
        texts,
        (root / "Makefile").read_text(),
        (root / "template.yaml").read_text(),
        (root / "tools" / "local" / "stack.py").read_text(),
    )


def self_test() -> int:
    texts, makefile, template, stack = repository(ROOT)
    table = "| function | trigger | does |\n|---|---|---|\n" + "".join(
        f"| `{f}` | | |\n" for f in sorted(template_functions(template))
    )
    good = "See [the rules](docs/rules.md#the-flow), `shared/domain/src/`, `make test` and `make shard-2`.\n"
    assert problems(ROOT, {"README.md": good + table}, makefile, template, stack) == [], "a good page fails"
    bad = (
        "See [gone](docs/gone.md), `shared/domain/src/no_such.rs`, `domain/src/moved.rs`, `make no-such-target`.\n"
        + "\n".join(table.split("\n")[:-2])  # the table without its last function
        + "\n| `no-such-function` | | |\n"
    )
    found = problems(ROOT, {"README.md": bad}, makefile, template, stack)
    expected = ["docs/gone.md", "shared/domain/src/no_such.rs", "names domain/src/moved.rs", "make no-such-target", "leaves out", "no-such-function"]
    for what in expected:
        assert any(what in p for p in found), f"the check missed {what}: {found}"
    undocumented = makefile.replace("## clean:", "# clean:")
    assert any("make clean" in p for p in problems(ROOT, {}, undocumented, template, stack)), "an undocumented target passes"
    stale_template = template.replace("Description: API Gateway stage", "Description: A changed stage")
    assert any("settings.md" in p for p in problems(ROOT, {}, makefile, stale_template, stack)), "stale settings pass"
    print(f"docs check self-test: {len(expected) + 3} cases ok")
    return 0


def main(argv: list[str]) -> int:
    if "--self-test" in argv:
        return self_test()
    texts, makefile, template, stack = repository(ROOT)
    found = problems(ROOT, texts, makefile, template, stack)
    for problem in found:
        print(problem)
    print(f"docs check: {len(texts)} pages, {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
