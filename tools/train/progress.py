"""A tiny progress bar (tqdm is not a dependency): redraws one line on a terminal, and writes a
line every few percent when the output goes to a log file."""

import sys
import time


class Progress:
    def __init__(self, total, desc, stream=sys.stderr, log_every_percent=5):
        self.total = max(1, total)
        self.desc = desc
        self.stream = stream
        self.tty = stream.isatty()
        self.step = 0
        self.start = time.time()
        self.log_every = max(1, self.total * log_every_percent // 100)
        self.fields = ""

    def update(self, n=1, **fields):
        self.step += n
        if fields:
            self.fields = " ".join("%s=%s" % (k, ("%.4g" % v) if isinstance(v, float) else v)
                                   for k, v in fields.items())
        if self.tty or self.step % self.log_every == 0 or self.step == self.total:
            self._draw()

    def _draw(self):
        elapsed = time.time() - self.start
        frac = self.step / self.total
        eta = elapsed / frac - elapsed if frac > 0 else 0.0
        width = 30
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        line = "%s [%s] %d/%d %3.0f%% %s<%s %s" % (
            self.desc, bar, self.step, self.total, 100 * frac, _clock(elapsed), _clock(eta), self.fields)
        if self.tty:
            self.stream.write("\r" + line + "\033[K")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self):
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
        return time.time() - self.start


def _clock(seconds):
    seconds = int(seconds)
    return "%d:%02d:%02d" % (seconds // 3600, seconds // 60 % 60, seconds % 60)
