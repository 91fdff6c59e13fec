#!/usr/bin/env python3
"""Names that two files of one unity-built test binary both define in an anonymous namespace.

A test binary compiles its files in unity batches (tests/CMakeLists.txt): the files of a batch
are one translation unit, so the helpers in their anonymous namespaces share one scope. Two
helpers of one name either fail to compile or, when their parameters differ, overload each
other, and a call can bind to the other file's helper without a word from the compiler. This
reads the batches CMake generated under a build directory and lists every name that two files
of one binary define in the same namespace, across all the binary's batches (which files share
a batch changes as files are added).

Definitions are read in the layout the sources use: namespace bodies are not indented, so a
helper function, class, constant or alias of a namespace starts in column 0.

  helper_names.py BUILD_DIR    one line per shared name and exit 1; exit 0 when there is none
"""
import collections
import pathlib
import re
import sys

INCLUDE = re.compile(r'^#include "(?P<path>[^"]+)"\s*$')
NAMESPACE_OPEN = re.compile(r'^namespace\s*(?P<name>[\w:]*)\s*\{\s*(?://.*)?$')
NAMESPACE_CLOSE = re.compile(r'^\}\s*//\s*namespace\b')
DEFINITIONS = [
    # A function: a return type, its name and "(", and not a declaration ending in ";".
    re.compile(r'^(?:template\s*<.*>\s*)?(?:(?:static|inline|constexpr|const)\s+)*'
               r'[\w:][\w:<>,*&\s]*[\s*&](?P<name>\w+)\s*\((?:.*\{.*|[^;]*)$'),
    # A class or struct (not a forward declaration).
    re.compile(r'^(?:class|struct)\s+(?P<name>\w+)\b(?!\s*;)'),
    # A constant.
    re.compile(r'^(?:(?:static|inline)\s+)*(?:constexpr|const)\s+[\w:<>,\s*&]+?[\s*&](?P<name>\w+)\s*(?:=|\{|\[)'),
    # A type alias.
    re.compile(r'^using\s+(?P<name>\w+)\s*='),
]
NOT_NAMES = {'if', 'for', 'while', 'switch', 'return', 'sizeof', 'operator'}


def anonymous_definitions(source):
    """(namespace, name, line) of each definition inside an anonymous namespace of `source`."""
    found = []
    stack = []  # enclosing namespaces, '' for an anonymous one
    for number, line in enumerate(source.read_text(errors='replace').splitlines(), start=1):
        opened = NAMESPACE_OPEN.match(line)
        if opened:
            stack.append(opened.group('name'))
            continue
        if NAMESPACE_CLOSE.match(line):
            if stack:
                stack.pop()
            continue
        if '' not in stack:
            continue
        for pattern in DEFINITIONS:
            match = pattern.match(line)
            if match and match.group('name') not in NOT_NAMES:
                found.append(('::'.join(n or '{anonymous}' for n in stack), match.group('name'), number))
                break
    return found


def binaries(build_dir):
    """{binary: [its source files]} from the unity batches CMake wrote under `build_dir`."""
    sources = collections.defaultdict(list)
    unity_dirs = pathlib.Path(build_dir).glob('**/CMakeFiles/*.dir/Unity')
    for batch in sorted(path for unity in unity_dirs for suffix in ('cxx', 'c') for path in unity.glob(f'unity_*.{suffix}')):
        binary = batch.parent.parent.name[:-len('.dir')]
        for line in batch.read_text().splitlines():
            included = INCLUDE.match(line)
            if included:
                sources[binary].append(pathlib.Path(included.group('path')))
    return sources


def shared_names(build_dir):
    """Lines naming each helper that two files of one binary define in the same namespace."""
    problems = []
    for binary, files in sorted(binaries(build_dir).items()):
        where = collections.defaultdict(list)
        for source in files:
            for namespace, name, line in anonymous_definitions(source):
                where[(namespace, name)].append(f'{source}:{line}')
        for (namespace, name), places in sorted(where.items()):
            if len({place.rsplit(':', 1)[0] for place in places}) > 1:
                problems.append(f'{binary}: {namespace}::{name} is defined in {", ".join(places)}')
    return problems


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    build_dir = sys.argv[1]
    count = sum(len(files) for files in binaries(build_dir).values())
    problems = shared_names(build_dir)
    for problem in problems:
        print(problem)
    if problems:
        print(f'{len(problems)} helper name(s) shared by files of one unity-built binary: rename one, '
              'or move a shared helper into a header of the folder')
        return 1
    print(f'{count} files in unity batches under {build_dir}: no helper name shared within a binary')
    return 0


if __name__ == '__main__':
    sys.exit(main())
