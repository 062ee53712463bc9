#!/usr/bin/env python3
"""Lists the functions of src/ whose bodies are longer than a limit (default 80 lines).

    scripts/long-functions.py            every function over 80 lines, longest first
    scripts/long-functions.py --max 60   over 60 lines
    scripts/long-functions.py FILE...    only these files

A function's length is the lines between its opening and its closing brace; lambdas and local
classes count towards the function that holds them. The code is read as clang-format leaves it
(.clang-format): comments, string and character literals (raw strings and digit separators
included) are skipped, and a brace opens a function when what precedes it at namespace or class
scope has a parameter list and is not an initializer. Exit status: 0 when none is over the limit,
1 otherwise (issue 20: "no function over 80 lines").
"""
import argparse
import os
import re
import sys

SOURCE_SUFFIXES = (".cc", ".h")


def code_of(text):
    """The text with comments and literals blanked out (newlines kept, so lines still count)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            open_paren = text.find("(", i + 2)
            delimiter = text[i + 2:open_paren]
            j = text.find(")" + delimiter + '"', open_paren)
            j = n if j < 0 else j + len(delimiter) + 2
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum()
                                             and i + 1 < n and text[i + 1].isalnum())):
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def scope_kind(statement):
    """What a brace after `statement` opens: namespace, class, function or other."""
    s = " ".join(statement.split())
    s = re.sub(r"^template\s*<[^(]*?>\s*", "", s)
    if re.search(r"\bnamespace\b", s) or s.startswith('extern ""'):
        return "namespace"
    if re.search(r"\boperator\b", s):
        return "function"
    head = s.split("(", 1)[0]
    if re.search(r"\b(class|struct|union)\b", head):
        return "class"
    if re.search(r"\benum\b", head) or "=" in head:
        return "other"
    return "function" if "(" in s else "other"


def function_name(statement):
    head = " ".join(statement.split()).split("(", 1)[0]
    operator = re.search(r"[\w:~]*operator\s*\S*$", head)
    if operator:
        return operator.group(0)
    words = head.split()
    return words[-1] if words else "?"


def functions(path):
    """(first line, name, body lines) of every function defined in `path`."""
    with open(path, encoding="utf-8") as f:
        code = code_of(f.read())
    found = []
    stack = []  # (kind, opening line, name, first line of the definition)
    statement, statement_line = "", None
    line = 1
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
            statement += " "
            continue
        outer = all(kind in ("namespace", "class") for kind, *_ in stack)
        if c == "{":
            if not outer:
                stack.append(("other", line, "", line))
            elif statement and (statement[-1].isalnum() or statement[-1] in "_>"):
                # A brace initializer inside a declaration (a member initializer list's `x_{1}`,
                # `Foo{...}`): part of the statement, not a scope.
                stack.append(("init", line, "", line))
                continue
            else:
                kind = scope_kind(statement)
                name = function_name(statement) if kind == "function" else ""
                stack.append((kind, line, name, statement_line or line))
            statement, statement_line = "", None
        elif c == "}":
            if stack:
                kind, opened, name, first = stack.pop()
                if kind == "function":
                    found.append((first, name, line - opened - 1))
                if kind == "init":
                    statement += "{}"
                    continue
            if all(kind in ("namespace", "class") for kind, *_ in stack):
                statement, statement_line = "", None
        elif c == ";" and outer:
            statement, statement_line = "", None
        elif outer:
            if not c.isspace() and statement_line is None:
                statement_line = line
            statement += c
            if c == ":" and re.fullmatch(r"\s*(public|private|protected)\s*:", statement):
                statement, statement_line = "", None
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max", type=int, default=80, help="longest body allowed (lines)")
    parser.add_argument("files", nargs="*", help="files to read (default: every file of src/)")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = args.files
    if not files:
        for folder, _, names in os.walk(os.path.join(root, "src")):
            files += [os.path.join(folder, n) for n in names if n.endswith(SOURCE_SUFFIXES)]
    over = []
    for path in sorted(files):
        for first, name, length in functions(path):
            if length > args.max:
                over.append((length, os.path.relpath(path, root), first, name))
    for length, path, first, name in sorted(over, key=lambda o: (-o[0], o[1], o[2])):
        print(f"{path}:{first}: {name}: {length} lines")
    if over:
        print(f"{len(over)} functions over {args.max} lines", file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
