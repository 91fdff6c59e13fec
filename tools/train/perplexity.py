#!/usr/bin/python3
"""Held-out perplexity of model directories, measured as train_pair.py measures the bundled pair
(the first non-overlapping windows of the held-out code and prose streams, tools/train/corpus.py),
so that a changed model -- for example the weights --quantize int8 serves, written by
`splitspec make-model --int8-of DIR --out OUT` -- can be compared with the original:

  /usr/bin/python3 tools/train/perplexity.py models/target /tmp/target-int8 [--window 256 --windows 48]

Later models are also given as a perplexity change against the first one. With
--int8-activations each model is measured a second time with the inputs of its matrix products
rounded to int8 per block of 32, as the engine's --quantize int8 kernel computes: on an
--int8-of copy that row is what the engine serves.
"""

import argparse
import math
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))

import corpus  # noqa: E402
import llama_reference as ref  # noqa: E402
import train_pair  # noqa: E402


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", help="model directories (each with tokenizer.model)")
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--windows", type=int, default=48)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--int8-activations", action="store_true",
                        help="also measure each model with int8 activations (see above)")
    args = parser.parse_args(argv)
    import sentencepiece as spm

    torch.set_num_threads(args.threads)
    parts = corpus.build()
    print("| model | code loss | code ppl | prose loss | prose ppl |")
    print("|---|---|---|---|---|")
    baseline = None
    for model_dir in args.models:
        sp = spm.SentencePieceProcessor(model_file=os.path.join(model_dir, "tokenizer.model"))
        variants = [(model_dir, ref.load_model(model_dir))]
        if args.int8_activations:
            variants.append((model_dir + " + int8 activations", ref.quantize_activations(ref.load_model(model_dir))))
        for name, model in variants:
            losses = {kind: train_pair.heldout_loss(model, train_pair.encode_documents(sp, parts[kind][1]),
                                                    args.window, args.windows, "cpu") for kind in ("code", "prose")}
            note = ""
            if baseline is None:
                baseline = losses
            else:
                note = " (ppl %+.2f%% / %+.2f%%)" % tuple(100 * (math.exp(losses[k] - baseline[k]) - 1)
                                                       for k in ("code", "prose"))
            print("| %s | %.4f | %.2f | %.4f | %.2f |%s" % (name, losses["code"], math.exp(losses["code"]),
                                                        losses["prose"], math.exp(losses["prose"]), note))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
