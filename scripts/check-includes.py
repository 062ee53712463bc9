#!/usr/bin/env python3
"""Checks the layering docs/architecture.md declares against the code and the build.

    scripts/check-includes.py        exit 0 when everything holds, 1 listing every breach

Reads the table under "## Layering" in docs/architecture.md (module, the modules it links, whether
it is pure) and checks:
  * every `#include "<module>/..."` of src/<module>/ names the module itself or one it links,
    directly or through another;
  * the table's links are exactly the DEPS of each module's src/<module>/CMakeLists.txt;
  * a pure module includes no I/O header (<fstream>, <iostream>, <filesystem>, POSIX I/O) and
    neither common/files.h nor store/store.h;
  * each heavy header stays in the one file allowed to include it.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
DOC = os.path.join(ROOT, "docs", "architecture.md")

IO_HEADERS = re.compile(
    r"^(fstream|iostream|filesystem|unistd\.h|fcntl\.h|dirent\.h|poll\.h|spawn\.h|sys/.*)$")
IO_PROJECT_HEADERS = {"common/files.h", "store/store.h", "store/db.h"}
# A heavy header and the only files that may include it.
HEAVY = {
    "toml++/toml.h": {"recipe/recipe_parser.cc"},
    "sqlite3.h": {"store/db.cc", "store/schema.cc", "store/store.cc"},
    "CLI/CLI.hpp": {"cli/app.cc"},
    "curl/curl.h": {"cluster/http_transport.cc"},
    "cuda_runtime.h": {"gpu/probe_cuda.cc"},
    "cublas_v2.h": {"gpu/probe_cuda.cc"},
    "nccl.h": {"gpu/probe_cuda.cc"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]', re.M)


def read_table():
    """{module: (set of linked modules, pure)} from the "## Layering" table."""
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    section = text.split("\n## Layering\n", 1)
    if len(section) != 2:
        sys.exit(f"{DOC}: no '## Layering' section")
    table = {}
    for line in section[1].split("\n## ", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not line.startswith("|") or cells[0] in ("module", "---"):
            continue
        name = cells[0].strip("`")
        links = {c.strip().strip("`") for c in cells[1].split(",") if c.strip() not in ("", "—")}
        table[name] = (links, cells[2] == "yes")
    if not table:
        sys.exit(f"{DOC}: the '## Layering' table is empty")
    return table


def closure(table, module):
    seen, todo = set(), list(table[module][0])
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(table.get(m, (set(), False))[0])
    return seen


def cmake_deps(module):
    """The libra_* DEPS of src/<module>/CMakeLists.txt, without the prefix."""
    path = os.path.join(SRC, module, "CMakeLists.txt")
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"#.*", "", f.read())
    call = re.search(r"libra_module\((.*?)\)", text, re.S)
    if call is None:
        return None
    words = call.group(1).split()
    deps, on = set(), False
    for w in words:
        if w in ("SOURCES", "PRIVATE_DEPS"):
            on = False
        elif w == "DEPS":
            on = True
        elif on and w.startswith("libra_"):
            deps.add(w[len("libra_"):].replace("cli_core", "cli"))
    return deps


def main():
    table = read_table()
    modules = sorted(d for d in os.listdir(SRC) if os.path.isdir(os.path.join(SRC, d)))
    problems = []
    for m in modules:
        if m not in table:
            problems.append(f"src/{m}: not in the Layering table of docs/architecture.md")
    for m in sorted(table):
        if m not in modules:
            problems.append(f"docs/architecture.md: module '{m}' has no src/{m}")
            continue
        deps = cmake_deps(m)
        if deps is not None and deps != table[m][0]:
            problems.append(f"src/{m}/CMakeLists.txt: DEPS {sorted(deps)} but docs/architecture.md "
                            f"says {sorted(table[m][0])}")
    for m in modules:
        if m not in table:
            continue
        allowed = closure(table, m) | {m}
        pure = table[m][1]
        folder = os.path.join(SRC, m)
        for name in sorted(os.listdir(folder)):
            if not name.endswith((".h", ".cc")):
                continue
            rel = f"{m}/{name}"
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                text = f.read()
            for match in INCLUDE.finditer(text):
                kind, header = match.groups()
                line = text.count("\n", 0, match.start()) + 1
                where = f"src/{rel}:{line}"
                top = header.split("/", 1)[0]
                if kind == '"' and top in table and top not in allowed:
                    problems.append(f"{where}: includes {header}, but {m} does not link {top}")
                if pure and (header in IO_PROJECT_HEADERS or
                             (kind == "<" and IO_HEADERS.match(header))):
                    problems.append(f"{where}: includes {header}, but {m} is pure (no I/O)")
                if header in HEAVY and rel not in HEAVY[header]:
                    problems.append(f"{where}: includes {header}, allowed only in "
                                    f"{', '.join(sorted(HEAVY[header]))}")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} layering problem(s)")
        return 1
    print(f"layering holds: {len(modules)} modules, every #include within the graph")
    return 0


if __name__ == "__main__":
    sys.exit(main())
