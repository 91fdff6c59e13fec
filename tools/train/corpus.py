"""Assembles the training corpus from text that ships with Debian, split into train and held-out
sets by file (never by line, so held-out text is genuinely unseen).

Two kinds of text, kept apart so that acceptance can be measured per kind:
  code:  the Python standard library sources (/usr/lib/python3.11/**/*.py, package
         libpython3.11-stdlib), without its test suites.
  code_extra: more Python for training only, from packages the build installs anyway (numpy,
         scipy, matplotlib and torch under /usr/lib/python3/dist-packages), without their test
         suites. It does not train the tokenizer and is not evaluated, so the tokenizer and the
         held-out figures stay comparable with pairs trained on the standard library alone.
  prose: the Python Language Reference topics shipped in pydoc_data/topics.py (plain English
         text), and the licence texts under /usr/share/common-licenses (package base-files).
Everything is deterministic: sorted file lists, and the held-out choice is a hash of the file's
path (or topic name), so it does not depend on the machine's file order or on a seed.
"""

import ast
import hashlib
import os

PYTHON_LIB = "/usr/lib/python3.11"
DIST_PACKAGES = "/usr/lib/python3/dist-packages"
EXTRA_CODE_PACKAGES = ("numpy", "scipy", "matplotlib", "torch")
LICENSES = "/usr/share/common-licenses"
_SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__", "pydoc_data"}
_MAX_FILE_BYTES = 400_000  # a few generated tables are larger; they teach nothing useful


def _held_out(key, percent):
    digest = hashlib.sha1(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "little") % 100 < percent


def _read_text(path, max_bytes=_MAX_FILE_BYTES):
    try:
        with open(path, "rb") as f:
            raw = f.read(max_bytes + 1)
        if len(raw) > max_bytes:
            return None
        return raw.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def code_documents(root=PYTHON_LIB):
    """(key, text) for every stdlib .py file outside test suites, sorted by path."""
    docs = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                text = _read_text(path)
                if text and text.strip():
                    docs.append((os.path.relpath(path, root), text))
    docs.sort()
    return docs


def extra_code_documents(root=DIST_PACKAGES, packages=EXTRA_CODE_PACKAGES):
    """(key, text) for the .py files of `packages`, keyed by their path under `root`. A missing
    package is an error: the corpus, and so the trained weights, would silently change."""
    docs = []
    for package in packages:
        path = os.path.join(root, package)
        if not os.path.isdir(path):
            raise FileNotFoundError("%s is missing (install python3-%s)" % (path, package))
        docs += [(os.path.join(package, key), text) for key, text in code_documents(path)]
    docs.sort()
    return docs


def prose_documents(root=PYTHON_LIB, licenses=LICENSES):
    """(key, text): each Language Reference topic, then each distinct licence text."""
    docs = []
    topics_path = os.path.join(root, "pydoc_data", "topics.py")
    source = _read_text(topics_path, 10_000_000) if os.path.exists(topics_path) else None
    if source is None:
        raise FileNotFoundError("%s is missing (package libpython3.11-stdlib)" % topics_path)
    # topics.py is one dict literal assignment: read it without executing it.
    tree = ast.parse(source)
    topics = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "topics" for t in node.targets):
            topics = ast.literal_eval(node.value)
    if not topics:
        raise ValueError("%s: no `topics` dictionary" % topics_path)
    for key in sorted(topics):
        docs.append(("topic:" + key, topics[key]))
    seen = set()
    for name in sorted(os.listdir(licenses)):
        real = os.path.realpath(os.path.join(licenses, name))
        if real in seen or not os.path.isfile(real):
            continue  # GPL -> GPL-3 and friends are symlinks: keep one copy
        seen.add(real)
        text = _read_text(real)
        if text:
            docs.append(("license:" + name, text))
    return docs


def split(docs, held_out_percent):
    train, held = [], []
    for key, text in docs:
        (held if _held_out(key, held_out_percent) else train).append((key, text))
    return train, held


def build(code_held_out_percent=8, prose_held_out_percent=15):
    """{'code': ..., 'code_extra': ..., 'prose': ...}, each (train, held), lists of (key, text).

    Licence texts always train: they come in near-identical families (GPL-2/GPL-3, GFDL-1.2/1.3),
    so holding one out would not give unseen prose. Held-out prose is Language Reference topics.
    """
    prose = prose_documents()
    topics = [d for d in prose if d[0].startswith("topic:")]
    licenses = [d for d in prose if not d[0].startswith("topic:")]
    prose_train, prose_held = split(topics, prose_held_out_percent)
    return {
        "code": split(code_documents(), code_held_out_percent),
        "code_extra": split(extra_code_documents(), code_held_out_percent),
        "prose": (prose_train + licenses, prose_held),
    }
