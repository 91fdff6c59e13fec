#!/usr/bin/python3
"""Acceptance of the draft model and of the n-gram proposer measured through the real services:
a verifier on the target, a draft-model drafter, an n-gram drafter and a router with the
static:K policy, all on loopback, driven by `splitspec generate --router`. Same workloads as
measure_acceptance.py (held-out code, held-out prose, repetitive text), so the two tables can be
compared: this one includes everything the serving stack does (tokenising the text prompt,
KV rollback, the n-gram drafter's own lookup rules).

  /usr/bin/python3 tools/train/service_acceptance.py --models models/ --build build [--k 4]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import measure_acceptance  # noqa: E402
from progress import Progress  # noqa: E402

USAGE_LINE = re.compile(r"\[(\d+) tokens, (\d+) steps, mean accept length [0-9.]+ \((\d+)/(\d+) drafts accepted\)")


class Services:
    """Starts the processes with --port 0 and reads each one's address from its log."""

    def __init__(self, build, log_dir):
        self.build, self.log_dir, self.procs = build, log_dir, []
        self.env = dict(os.environ, OMP_WAIT_POLICY="passive")

    def start(self, name, args):
        log_path = os.path.join(self.log_dir, name + ".log")
        log = open(log_path, "w")
        proc = subprocess.Popen([os.path.join(self.build, "bin", args[0])] + args[1:] +
                                ["--port", "0", "--metrics-port", "-1"],
                                stdout=log, stderr=subprocess.STDOUT, env=self.env)
        self.procs.append(proc)
        deadline = time.time() + 60
        while time.time() < deadline:
            with open(log_path) as f:
                for line in f:
                    if "listening on" in line:
                        return line.split()[3]
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        with open(log_path) as f:
            raise RuntimeError("%s did not start:\n%s" % (name, f.read()))

    def stop(self):
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.wait(timeout=30)


def generate(build, router, prompt, pool, max_tokens):
    """Returns (tokens, steps, accepted, drafted) of one greedy request."""
    out = subprocess.run([os.path.join(build, "bin", "splitspec"), "generate", "--router", router,
                          "--prompt", prompt, "--max-tokens", str(max_tokens), "--drafter", pool],
                         capture_output=True, text=True, timeout=300)
    match = USAGE_LINE.search(out.stdout + out.stderr)
    if out.returncode != 0 or match is None:
        raise RuntimeError("generate failed (%d): %s" % (out.returncode, out.stderr[-2000:]))
    return tuple(int(x) for x in match.groups())


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="models")
    parser.add_argument("--build", default="build")
    parser.add_argument("--k", type=int, default=4)
    # Rates measured on 6 prompts per workload moved by up to 0.17 when measured again on 24.
    parser.add_argument("--prompts", type=int, default=24, help="prompts per workload")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="engine threads of each worker")
    parser.add_argument("--readme", help="also write the table as a section of this markdown file")
    args = parser.parse_args(argv)
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=os.path.join(args.models, "target", "tokenizer.model"))
    workloads = {name: [sp.decode(ids) for ids in prompts]
                 for name, prompts in measure_acceptance.workload_token_windows(sp, args.models, args.prompts).items()}
    threads = str(args.threads)
    with tempfile.TemporaryDirectory() as log_dir:
        services = Services(args.build, log_dir)
        try:
            verifier = services.start("verifier", ["splitspec-verifier", "--model", os.path.join(args.models, "target"),
                                                   "--expose-model-path",
                                                   "--threads", threads])
            model = services.start("model-drafter", ["splitspec-drafter", "--model", os.path.join(args.models, "draft"),
                                                     "--threads", threads])
            ngram = services.start("ngram-drafter", ["splitspec-drafter", "--ngram"])
            router = services.start("router", ["splitspec-router", "--verifier", verifier, "--drafter", "model=" + model,
                                               "--drafter", "ngram=" + ngram, "--policy", "static:%d" % args.k])
            rows = ["| workload | proposer | acceptance rate | mean accepted per step | tokens per target step |",
                    "|---|---|---|---|---|"]
            bar = Progress(sum(len(p) for p in workloads.values()) * 2, "requests")
            for name, prompts in workloads.items():
                for pool, label in (("model", "draft model"), ("ngram", "n-gram drafter")):
                    tokens = steps = accepted = drafted = 0
                    for prompt in prompts:
                        t, s, a, d = generate(args.build, router, prompt, pool, args.new_tokens)
                        tokens, steps, accepted, drafted = tokens + t, steps + s, accepted + a, drafted + d
                        bar.update(1)
                    rows.append("| %s | %s | %.2f | %.2f | %.2f |" % (
                        name, label, accepted / max(1, drafted), accepted / max(1, steps), tokens / max(1, steps)))
            bar.close()
        finally:
            services.stop()
    print("\n".join(rows))
    if args.readme:
        write_section(args.readme, args, rows)
    return 0


SECTION = "## Acceptance through the services"


def write_section(path, args, rows):
    measure_acceptance.replace_section(path, SECTION, [
        "The same workloads through the real verifier, drafters and router (`static:%d`, greedy), by" % args.k,
        "`tools/train/service_acceptance.py`: %d prompts per workload (token windows decoded to text)," % args.prompts,
        "%d new tokens each. A target step commits the accepted drafts plus the target's own token;" % args.new_tokens,
        "the n-gram drafter proposes nothing when the context has no match, so its rate counts only",
        "what it proposed.",
    ], rows)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
