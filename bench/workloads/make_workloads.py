#!/usr/bin/python3
"""Writes the workloads of `splitspec bench` (bench/workloads/*.jsonl), deterministically.

Prompts come from the held-out split of the bundled models' training corpus
(tools/train/corpus.py: held-out Python standard library files and Language Reference topics),
so a trained pair is measured on text it never saw; the chat prompts are written here.

  chat.jsonl  short conversational questions (User/Assistant framing), short answers
  code.jsonl  code completion: the lines of a held-out module up to a function signature
  qa.jsonl    summarisation / QA over a long held-out context, where the answer quotes the
              context (the regime in which n-gram prompt lookup shines)
  prose.jsonl continuation of held-out Language Reference prose: a few paragraphs cut after a
              sentence
  mix.jsonl   phase-changing mix: blocks of chat, QA and code in turn (a policy has to adapt
              when the phase changes)

Run from anywhere; needs only the standard library and Debian's python3.11 stdlib sources:
  /usr/bin/python3 bench/workloads/make_workloads.py [--out bench/workloads]
"""

import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "train"))

import corpus  # noqa: E402

CHAT_QUESTIONS = [
    "How do I reverse a list in Python?",
    "What is the difference between a list and a tuple?",
    "Can you explain what a generator is?",
    "Why does my loop variable keep its value after the loop ends?",
    "What does the `with` statement do?",
    "How do I read a file line by line?",
    "What is a decorator, in one paragraph?",
    "When should I use a dictionary instead of a list?",
    "How do I sort a list of tuples by the second element?",
    "What happens when an exception is not caught?",
    "Explain the difference between `is` and `==`.",
    "What is the purpose of `__init__`?",
    "How can I format a number with two decimal places?",
    "What is a lambda function good for?",
    "How do I check whether a key is in a dictionary?",
    "Why are default mutable arguments a problem?",
    "What does `yield from` do?",
    "How do I merge two dictionaries?",
    "What is the global interpreter lock?",
    "How do I create a virtual environment?",
    "What is the difference between a module and a package?",
    "How do slices work on strings?",
    "What does `*args` mean in a function definition?",
    "How do I convert a string to an integer safely?",
    "What is a context manager?",
    "Explain list comprehensions with an example.",
    "What does the `nonlocal` keyword do?",
    "How do I iterate over two lists at the same time?",
    "What is the difference between `str` and `bytes`?",
    "How do I remove duplicates from a list and keep the order?",
    "What is a class method?",
    "How does Python look up a name inside a function?",
]


def chat_items(prose_held):
    items = []
    for i, q in enumerate(CHAT_QUESTIONS):
        items.append({"id": "chat-%03d" % i, "category": "chat", "max_tokens": 64,
                      "prompt": "User: %s\nAssistant:" % q})
    # Questions about the held-out reference topics, so a trained model sees unseen subjects.
    for key, _ in prose_held:
        topic = key.split(":", 1)[1]
        items.append({"id": "chat-topic-%s" % topic, "category": "chat", "max_tokens": 64,
                      "source": key,
                      "prompt": "User: What does the language reference say about '%s'?\nAssistant:" % topic})
    return items


_DEF = re.compile(r"^(\s*)def \w+\(.*\):\s*$")


def code_items(code_held, limit=40, per_file=2, context_lines=14, max_chars=450):
    """Prompts ending right after a one-line `def` signature, with the lines before it."""
    items = []
    for key, text in code_held:
        lines = text.splitlines()
        taken = 0
        # Spread picks over the file: the first suitable def after each evenly spaced start.
        starts = [len(lines) * (j + 1) // (per_file + 1) for j in range(per_file)]
        for start in starts:
            for n in range(start, len(lines)):
                if _DEF.match(lines[n]):
                    window = lines[max(0, n - context_lines):n + 1]
                    prompt = "\n".join(window) + "\n"
                    if len(prompt) > max_chars:
                        prompt = prompt[-max_chars:]
                        prompt = prompt[prompt.index("\n") + 1:]  # start on a whole line
                    items.append({"id": "code-%s-%d" % (key.replace("/", "."), n + 1), "category": "code",
                                  "max_tokens": 96, "source": key, "prompt": prompt})
                    taken += 1
                    break
            if taken >= per_file:
                break
        if len(items) >= limit:
            break
    # Distinct ids (two starts can find the same def).
    seen, unique = set(), []
    for item in items:
        if item["id"] not in seen:
            seen.add(item["id"])
            unique.append(item)
    return unique[:limit]


_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def _paragraph_windows(text, target_chars):
    """Consecutive windows of whole paragraphs, each about target_chars long."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    window, size = [], 0
    for p in paragraphs:
        window.append(p)
        size += len(p)
        if size >= target_chars:
            yield "\n\n".join(window)
            window, size = [], 0
    if size >= target_chars // 2:
        yield "\n\n".join(window)


def qa_items(prose_held, code_held, limit=32, target_chars=600):
    items = []
    for key, text in prose_held:
        for w, context in enumerate(_paragraph_windows(text, target_chars)):
            if len(context) > 2 * target_chars:
                continue  # one huge paragraph (a table): too long for a small model's context
            # Quote a sentence from the second half of the context, so the answer has to find it.
            sentences = [s for s in _SENTENCE.split(context) if 60 <= len(s) <= 400 and "\n" not in s]
            if not sentences:
                continue
            sentence = sentences[len(sentences) * 2 // 3]
            opening = " ".join(sentence.split()[:5])
            prompt = ("Read the text and answer by quoting it exactly.\n\n%s\n\n"
                      "Question: Which sentence of the text begins with \"%s\"? Quote it in full.\n"
                      "Answer: \"%s" % (context, opening, opening))
            items.append({"id": "qa-%s-%d" % (key.split(":", 1)[1], w), "category": "qa", "max_tokens": 64,
                          "source": key, "prompt": prompt})
    # Summaries of held-out code: the summary quotes names and lines from the listing.
    for key, text in code_held:
        if len(items) >= limit:
            break
        listing = text[:target_chars]
        listing = listing[:listing.rfind("\n") + 1]
        prompt = ("Summarise what this module does, quoting the names it defines.\n\n```python\n%s```\n\n"
                  "Summary: The module `%s` defines" % (listing, key))
        items.append({"id": "qa-code-%s" % key.replace("/", "."), "category": "qa", "max_tokens": 64,
                      "source": key, "prompt": prompt})
    return items[:limit]


def prose_items(prose_held, limit=24, target_chars=420):
    """Held-out prose to continue: whole paragraphs up to about target_chars, ending after a
    sentence, drawn round-robin from the held-out topics so that every topic is represented."""
    per_topic = []
    for key, text in prose_held:
        windows = []
        for w, context in enumerate(_paragraph_windows(text, target_chars)):
            cut = [m.start() for m in _SENTENCE.finditer(context) if m.start() >= target_chars // 2]
            if not cut or cut[0] > 2 * target_chars:
                continue  # no sentence end in reach (a table or a long listing)
            windows.append({"id": "prose-%s-%d" % (key.split(":", 1)[1], w), "category": "prose",
                            "max_tokens": 128, "source": key, "prompt": context[:cut[0]]})
        per_topic.append(windows)
    items = []
    for i in range(max((len(w) for w in per_topic), default=0)):
        items += [w[i] for w in per_topic if i < len(w)]
    return items[:limit]


def mix_items(chat, qa, code, block=8, blocks=9):
    """Blocks of `block` requests: chat, qa, code, chat, qa, ... with a phase label per block."""
    kinds = [("chat", chat), ("qa", qa), ("code", code)]
    cursor = {name: 0 for name, _ in kinds}
    items = []
    for b in range(blocks):
        name, pool = kinds[b % len(kinds)]
        for _ in range(block):
            item = dict(pool[cursor[name] % len(pool)])
            cursor[name] += 1
            item["id"] = "mix-%02d-%s" % (len(items), item["id"])
            item["phase"] = "%d-%s" % (b, name)
            items.append(item)
    return items


def write(path, items):
    with open(path, "w", encoding="utf-8") as f:
        for item in items:
            f.write(json.dumps(item, ensure_ascii=False, sort_keys=True) + "\n")
    print("%s: %d prompts" % (path, len(items)))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=HERE)
    args = parser.parse_args(argv)
    parts = corpus.build()
    code_held = parts["code"][1]
    prose_held = parts["prose"][1]
    chat = chat_items(prose_held)
    code = code_items(code_held)
    qa = qa_items(prose_held, code_held)
    os.makedirs(args.out, exist_ok=True)
    write(os.path.join(args.out, "chat.jsonl"), chat)
    write(os.path.join(args.out, "code.jsonl"), code)
    write(os.path.join(args.out, "qa.jsonl"), qa)
    write(os.path.join(args.out, "prose.jsonl"), prose_items(prose_held))
    write(os.path.join(args.out, "mix.jsonl"), mix_items(chat, qa, code))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
