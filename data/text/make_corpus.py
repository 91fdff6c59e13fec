#!/usr/bin/env python3
"""Writes tokenizer_corpus.txt: original, procedurally generated text for training the
SentencePiece tokenizers of random test models (`splitspec make-model` runs spm_train on it).

Every line comes from a seeded generator over word lists written here, so the output is
byte-for-byte reproducible with any Python 3 (only random.Random with a fixed seed is used).
The mix (prose, dialogue, source-code-like lines, numbers and tables, a little non-ASCII) is
there so BPE vocabularies of up to 8192 pieces can be trained on it and so tokenizer tests
see digits, punctuation, indentation and multi-byte characters.

Usage: make_corpus.py [OUTPUT]   (default: tokenizer_corpus.txt next to this script)
"""

import os
import random
import sys

SEED = 20240611
TARGET_BYTES = 460_000

NOUNS = """
river engine garden signal harbor lantern market window ledger valley kettle bridge
compass orchard meadow tower forest mirror teacher painter sailor farmer doctor student
machine network packet server client router buffer thread kernel socket channel cluster
mountain island desert ocean village castle library museum station theatre kitchen
hammer needle ribbon button pocket basket candle blanket pillow carpet ladder bucket
letter record figure pattern problem answer question reason result theory method
journey season morning evening winter summer autumn spring weather thunder shadow
circle square triangle number matrix vector tensor gradient layer weight token sentence
paragraph chapter story poem song melody rhythm drum violin piano guitar trumpet
apple pepper onion carrot lemon cherry walnut barley wheat honey butter cheese bread
horse rabbit falcon sparrow salmon turtle beetle spider badger otter heron raven
friend neighbor stranger captain merchant soldier builder keeper hunter weaver miller
company council committee office contract budget invoice payment account balance
memory cache queue stack heap pointer array string object module package library
country province county harbour border frontier coast canal tunnel highway railway
planet comet galaxy nebula orbit crater telescope satellite rocket launch mission
""".split()

VERBS = """
walk carry build open close follow gather measure paint repair count explain listen
watch borrow answer remember forget describe compare collect deliver design develop
discover divide expect finish gather handle improve include inspect invent join
launch manage mention notice observe order organize plant prepare protect publish
reach receive record reduce release replace report request return review schedule
search select settle share signal solve sort start store support switch test trace
train travel turn update verify visit wander wash weigh whisper wonder wrap write
compile execute allocate decode encode forward verify commit truncate sample merge
""".split()

IRREGULAR = {
    "build": ("built", "building"), "write": ("wrote", "writing"), "begin": ("began", "beginning"),
    "run": ("ran", "running"), "swim": ("swam", "swimming"), "sing": ("sang", "singing"),
    "bring": ("brought", "bringing"), "think": ("thought", "thinking"), "catch": ("caught", "catching"),
    "teach": ("taught", "teaching"), "find": ("found", "finding"), "hold": ("held", "holding"),
    "keep": ("kept", "keeping"), "leave": ("left", "leaving"), "speak": ("spoke", "speaking"),
}
VERBS += list(IRREGULAR)

ADJECTIVES = """
quiet bright narrow ancient gentle heavy hollow silent golden careful curious distant
early famous fragile generous honest hungry little modern patient polite rapid rare
rough shallow sharp simple slow smooth solid steady strange sudden tall tender tiny
vast warm wide wild wise young green purple crimson amber silver wooden stone iron
linear sparse dense random greedy parallel remote local global static dynamic stable
""".split()

ADVERBS = """
quickly slowly carefully quietly rarely often never always suddenly gently loudly
softly barely nearly almost certainly probably eventually finally easily clearly
""".split()

FUNCTION = "the a this that every each some no another one".split()
PREPS = "in on under over near behind beside across through along toward from into onto beyond".split()
CONJ = ["and", "but", "so", "because", "while", "although", "until", "when", "before", "after"]
PRONOUNS = ["she", "he", "they", "we", "you", "I", "it", "nobody", "someone", "everyone"]

# Syllables for invented names of people, places and species: they give the trainer many
# distinct rare words, which is what lets BPE vocabularies grow to several thousand pieces.
ONSETS = ["b", "br", "c", "ch", "d", "dr", "f", "g", "gr", "h", "j", "k", "kl", "l", "m", "n",
          "p", "pr", "qu", "r", "s", "sh", "st", "t", "th", "tr", "v", "w", "z", "", ""]
VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ou", "io", "y", "ae", "ie"]
CODAS = ["", "", "n", "r", "l", "s", "th", "nd", "rk", "st", "m", "x", "ng", "ck"]
SUFFIXES = ["ia", "on", "ar", "ium", "ville", "berg", "ford", "wick", "stad", "mont", "heim",
            "ora", "ix", "is", "eth", "ulo"]
# A little non-ASCII: accented Latin letters, Greek, symbols, a few CJK words and emoji.
ACCENTED = ["é", "è", "ü", "ö", "ñ", "ç", "å", "ø", "í", "ã", "ł", "ž"]
UNICODE_BITS = ["α", "β", "γ", "λ", "μ", "σ", "π", "Δ", "Ω", "≤", "≥", "→", "←", "×", "÷",
                "±", "≈", "°", "€", "£", "¥", "…", "—", "–", "“", "”", "‘", "’", "«", "»",
                "東京", "山", "水", "火", "日本語", "中文", "한국어", "Привет", "мир",
                "😀", "🚀", "✓", "★", "☕"]

KEYWORDS_PY = ["def", "return", "if", "elif", "else", "for", "while", "import", "from", "class",
               "with", "yield", "lambda", "assert", "raise", "try", "except", "pass", "None",
               "True", "False"]
TYPES_C = ["int", "float", "double", "char", "bool", "size_t", "int32_t", "uint64_t", "auto",
           "std::string", "std::vector<int>", "absl::Status", "const char*"]
OPERATORS = ["+", "-", "*", "/", "%", "==", "!=", "<=", ">=", "<", ">", "&&", "||", "<<", ">>",
             "&", "|", "^"]


class Generator:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.names = [self.invented_word(2, 3).capitalize() for _ in range(900)]
        self.places = [self.invented_word(1, 2).capitalize() + self.r.choice(SUFFIXES)
                       for _ in range(700)]
        self.species = [self.invented_word(2, 4) for _ in range(900)]
        for i in range(0, len(self.names), 9):
            self.names[i] = self.accent(self.names[i])
        for i in range(0, len(self.places), 11):
            self.places[i] = self.accent(self.places[i])

    def pick(self, seq):
        return self.r.choice(seq)

    def invented_word(self, lo, hi):
        return "".join(self.pick(ONSETS) + self.pick(VOWELS) + self.pick(CODAS)
                       for _ in range(self.r.randint(lo, hi)))

    def accent(self, word):
        i = self.r.randrange(1, max(2, len(word)))
        return word[:i] + self.pick(ACCENTED) + word[i + 1:]

    # ---- word forms ----
    def plural(self, noun):
        if noun.endswith(("s", "x", "ch", "sh")):
            return noun + "es"
        if noun.endswith("y") and noun[-2] not in "aeiou":
            return noun[:-1] + "ies"
        return noun + "s"

    def past(self, verb):
        if verb in IRREGULAR:
            return IRREGULAR[verb][0]
        if verb.endswith("e"):
            return verb + "d"
        if verb.endswith("y") and verb[-2] not in "aeiou":
            return verb[:-1] + "ied"
        return verb + "ed"

    def gerund(self, verb):
        if verb in IRREGULAR:
            return IRREGULAR[verb][1]
        if verb.endswith("e") and not verb.endswith("ee"):
            return verb[:-1] + "ing"
        return verb + "ing"

    def third(self, verb):
        if verb.endswith(("s", "x", "ch", "sh")):
            return verb + "es"
        if verb.endswith("y") and verb[-2] not in "aeiou":
            return verb[:-1] + "ies"
        return verb + "s"

    # ---- prose ----
    def noun_phrase(self):
        r = self.r.random()
        if r < 0.15:
            return self.pick(self.names)
        if r < 0.22:
            return "the " + self.pick(self.species)
        words = [self.pick(FUNCTION)]
        if self.r.random() < 0.5:
            words.append(self.pick(ADJECTIVES))
        noun = self.pick(NOUNS)
        if words[0] in ("some", "no") or self.r.random() < 0.2:
            noun = self.plural(noun)
            if words[0] in ("a", "this", "every", "each", "another", "one"):
                words[0] = self.pick(["the", "some", "these", "those", "many", "few"])
        words.append(noun)
        if self.r.random() < 0.25:
            words += ["of", self.pick(self.places)]
        return " ".join(words)

    def verb_phrase(self):
        verb = self.pick(VERBS)
        form = self.r.random()
        if form < 0.45:
            v = self.past(verb)
        elif form < 0.65:
            v = "was " + self.gerund(verb)
        elif form < 0.8:
            v = self.third(verb)
        else:
            v = self.pick(["will", "could", "might", "should", "must"]) + " " + verb
        parts = [v, self.noun_phrase()]
        if self.r.random() < 0.5:
            parts += [self.pick(PREPS), self.noun_phrase()]
        if self.r.random() < 0.3:
            parts.append(self.pick(ADVERBS))
        return " ".join(parts)

    def clause(self):
        subject = self.noun_phrase() if self.r.random() < 0.75 else self.pick(PRONOUNS)
        return subject + " " + self.verb_phrase()

    def sentence(self):
        s = self.clause()
        if self.r.random() < 0.35:
            s += self.pick([", ", " "]) + self.pick(CONJ) + " " + self.clause()
        if self.r.random() < 0.12:
            s += ", " + self.number_phrase()
        if self.r.random() < 0.05:
            s += " (" + self.pick(UNICODE_BITS) + ")"
        s = s[0].upper() + s[1:]
        return s + self.pick([".", ".", ".", ".", "!", "?", ";", "..."])

    def number_phrase(self):
        r = self.r.random()
        if r < 0.2:
            return "in %d" % self.r.randint(1200, 2099)
        if r < 0.4:
            return "about %d %s" % (self.r.randint(2, 9999), self.plural(self.pick(NOUNS)))
        if r < 0.55:
            return "at %d:%02d" % (self.r.randint(0, 23), self.r.randint(0, 59))
        if r < 0.7:
            return "roughly %.1f%%" % (self.r.random() * 100)
        if r < 0.85:
            return "for $%d.%02d" % (self.r.randint(1, 5000), self.r.randint(0, 99))
        return "on %04d-%02d-%02d" % (self.r.randint(1900, 2099), self.r.randint(1, 12),
                                     self.r.randint(1, 28))

    def prose_line(self):
        return " ".join(self.sentence() for _ in range(self.r.randint(1, 5)))

    def dialogue_line(self):
        speaker = self.pick(self.names)
        quote = self.sentence()
        verb = self.pick(["said", "asked", "replied", "whispered", "shouted", "noted"])
        if self.r.random() < 0.5:
            return '"%s" %s %s.' % (quote, speaker, verb)
        return '%s %s: "%s"' % (speaker, verb, quote)

    # ---- code-like lines ----
    def identifier(self):
        words = [self.pick(NOUNS + VERBS + ADJECTIVES) for _ in range(self.r.randint(1, 3))]
        style = self.r.random()
        if style < 0.5:
            name = "_".join(words)
        elif style < 0.8:
            name = words[0] + "".join(w.capitalize() for w in words[1:])
        else:
            name = "".join(w.capitalize() for w in words)
        if self.r.random() < 0.15:
            name += str(self.r.randint(0, 99))
        return name

    def expression(self, depth=0):
        r = self.r.random()
        if depth > 2 or r < 0.35:
            leaf = self.r.random()
            if leaf < 0.5:
                return self.identifier()
            if leaf < 0.75:
                return str(self.r.randint(0, 4096))
            if leaf < 0.85:
                return "%.3f" % (self.r.random() * 10)
            if leaf < 0.93:
                return "0x%X" % self.r.randint(0, 0xFFFFFF)
            return '"%s"' % self.pick(NOUNS + self.species)
        if r < 0.7:
            return "%s %s %s" % (self.expression(depth + 1), self.pick(OPERATORS),
                                 self.expression(depth + 1))
        if r < 0.85:
            args = ", ".join(self.expression(depth + 1) for _ in range(self.r.randint(0, 3)))
            return "%s(%s)" % (self.identifier(), args)
        return "%s[%s]" % (self.identifier(), self.expression(depth + 1))

    def python_block(self):
        fn = self.identifier()
        params = ", ".join(self.identifier() for _ in range(self.r.randint(0, 3)))
        lines = ["def %s(%s):" % (fn, params)]
        if self.r.random() < 0.5:
            lines.append('    """%s"""' % self.sentence())
        for _ in range(self.r.randint(1, 5)):
            kind = self.r.random()
            if kind < 0.5:
                lines.append("    %s = %s" % (self.identifier(), self.expression()))
            elif kind < 0.7:
                lines.append("    if %s:" % self.expression())
                lines.append("        %s(%s)" % (self.identifier(), self.expression()))
            elif kind < 0.85:
                lines.append("    for %s in range(%d):" % (self.pick("ijkn"), self.r.randint(1, 512)))
                lines.append("        %s += %s" % (self.identifier(), self.expression()))
            else:
                lines.append("    # %s" % self.clause())
        lines.append("    return %s" % self.expression())
        return lines

    def c_block(self):
        fn = self.identifier()
        params = ", ".join("%s %s" % (self.pick(TYPES_C), self.identifier())
                           for _ in range(self.r.randint(0, 3)))
        lines = ["%s %s(%s) {" % (self.pick(TYPES_C), fn, params)]
        for _ in range(self.r.randint(1, 5)):
            kind = self.r.random()
            if kind < 0.5:
                lines.append("  %s %s = %s;" % (self.pick(TYPES_C), self.identifier(),
                                                self.expression()))
            elif kind < 0.7:
                lines.append("  if (%s) {" % self.expression())
                lines.append("    return %s;" % self.expression())
                lines.append("  }")
            elif kind < 0.85:
                lines.append("  for (int i = 0; i < %d; ++i) %s[i] = %s;" % (
                    self.r.randint(1, 1024), self.identifier(), self.expression()))
            else:
                lines.append("  // %s" % self.sentence())
        lines.append("  return %s;" % self.expression())
        lines.append("}")
        return lines

    def shell_line(self):
        cmd = self.pick(["ls -la", "grep -rn", "cat", "mkdir -p", "cp -r", "tar xzf", "make -j4",
                         "git log --oneline", "curl -s", "python3 -m", "./run.sh --threads"])
        return "$ %s %s/%s.%s" % (cmd, self.identifier(), self.identifier(),
                                  self.pick(["txt", "cc", "py", "json", "log", "csv", "md"]))

    def json_line(self):
        fields = ", ".join('"%s": %s' % (self.identifier(), self.expression(3))
                           for _ in range(self.r.randint(1, 4)))
        return "{%s}" % fields

    def table_block(self):
        cols = [self.identifier() for _ in range(self.r.randint(2, 5))]
        lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for _ in range(self.r.randint(2, 6)):
            cells = []
            for _ in cols:
                r = self.r.random()
                if r < 0.4:
                    cells.append(str(self.r.randint(-500, 100000)))
                elif r < 0.7:
                    cells.append("%.4g" % (self.r.random() * 10 ** self.r.randint(-3, 6)))
                else:
                    cells.append(self.pick(self.species + self.places))
            lines.append("| " + " | ".join(cells) + " |")
        return lines

    def list_block(self):
        bullet = self.pick(["-", "*", "1."])
        return ["%s %s" % (bullet, self.clause().capitalize()) for _ in range(self.r.randint(2, 6))]

    def glossary_line(self):
        word = self.pick(self.species)
        return "%s (%s): %s" % (word.capitalize(), self.pick(["n.", "v.", "adj."]),
                                self.sentence())

    def block(self):
        r = self.r.random()
        if r < 0.45:
            return [self.prose_line() for _ in range(self.r.randint(1, 4))]
        if r < 0.55:
            return [self.dialogue_line() for _ in range(self.r.randint(1, 3))]
        if r < 0.67:
            return self.python_block()
        if r < 0.77:
            return self.c_block()
        if r < 0.81:
            return [self.shell_line() for _ in range(self.r.randint(1, 3))]
        if r < 0.85:
            return [self.json_line()]
        if r < 0.90:
            return self.table_block()
        if r < 0.95:
            return self.list_block()
        return [self.glossary_line() for _ in range(self.r.randint(1, 4))]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "tokenizer_corpus.txt")
    gen = Generator(SEED)
    lines = []
    size = 0
    while size < TARGET_BYTES:
        for line in gen.block():
            lines.append(line)
            size += len(line.encode("utf-8")) + 1
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
