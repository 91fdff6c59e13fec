#!/usr/bin/python3
"""bench/llamacpp/summarize.py on output in compare.sh's form: every round of every format is
read, ratios and counts come from those figures, and an incomplete block is left out.

  /usr/bin/python3 tests/bench/llamacpp_summarize_test.py
"""

import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "llamacpp"))

import summarize  # noqa: E402


def block(fmt, load, step_ms, tok_s, forward16_ms, paired_share, kernel_gb_s, llama_tok_s, llama16_ms):
    """One format's lines as compare.sh prints them (bench-engine's grep, then step_bench's last line)."""
    return f"""== {fmt} (load average {load} 1.00 1.00)
read bandwidth ceiling (87 MB read, the weights' size; best of 7 read kernels): 30.1 GB/s (8 streams)
1               {step_ms:.2f}          {tok_s:.1f}
batch-1 decode reads weights at 16.9 GB/s = 56% of the read ceiling, 30.1 GB/s (8 streams); read kernels before and after, best of each:
paired: 16 decode steps, each followed by one pass of every read kernel; the kernel with the best median, 8 streams, read {kernel_gb_s} GB/s (median; 19.6-29.6): a step's reads are {paired_share}% of that kernel's pass after it (median; middle half 67-72%), 69% of the pass's best kernel
1               {step_ms + 0.1:.2f}         1.00
16              {forward16_ms:.2f}         5.95
llama.cpp /m/{fmt}.gguf threads 2 context 64: decode {1000 / llama_tok_s:.3f} ms ({llama_tok_s:.1f} tok/s), 16-token forward {llama16_ms:.3f} ms (6.26x)
"""


class SummarizeTest(unittest.TestCase):
    def summary(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(text)
        try:
            return summarize.summarize(summarize.parse(open(f.name)))
        finally:
            os.unlink(f.name)

    def test_rounds_become_one_row_per_format(self):
        text = ("## round 1\n" + block("f32", 0.5, 12.0, 80.0, 30.0, 91, 27.6, 64.0, 40.0)
                + block("int8", 0.7, 3.0, 300.0, 16.0, 70, 31.1, 150.0, 28.0)
                + "## round 2\n" + block("f32", 0.9, 14.0, 70.0, 32.0, 88, 25.0, 75.0, 41.0)
                + block("int8", 1.1, 3.2, 290.0, 17.0, 72, 30.0, 145.0, 29.0))
        lines = self.summary(text).splitlines()
        f32 = next(line for line in lines if line.startswith("| F32 |"))
        int8 = next(line for line in lines if line.startswith("| int8 / Q8_0 |"))
        self.assertIn("80.0 / 64.0 (1.25), 70.0 / 75.0 (0.93)", f32)
        self.assertIn("91% of 27.6, 88% of 25.0", f32)
        # 87 MB a step: llama.cpp's 1000 / 64 = 15.625 ms steps read 5.57 GB/s, 20% of 27.6; its
        # 13.333 ms steps in round 2, 6.53 GB/s, 26% of 25.0.
        self.assertIn("| 20%, 26% |", f32)
        self.assertIn("30.0-32.0 / 40.0-41.0", f32)
        self.assertIn("| 1 of 2 | 1.09 |", f32)  # the median of 1.25 and 0.93
        self.assertIn("300.0 / 150.0 (2.00), 290.0 / 145.0 (2.00)", int8)
        self.assertIn("| 2 of 2 | 2.00 |", int8)
        self.assertIn("Load average (1 min) at the blocks' starts: 0.50-1.10.", lines[-1])

    def test_without_the_steps_bytes_llama_cpps_share_is_a_dash(self):
        text = block("f16", 0.5, 6.0, 160.0, 25.0, 80, 27.0, 120.0, 30.0)
        text = "\n".join(line for line in text.splitlines() if not line.startswith("read bandwidth ceiling")) + "\n"
        f16 = next(line for line in self.summary(text).splitlines() if line.startswith("| F16 |"))
        self.assertIn("| 80% of 27.0 | - |", f16)

    def test_step_pairs_get_a_column_of_their_own(self):
        def pairs(ratio, won):
            return (f"paired decode, 2 threads, context 64, 40 step pairs: splitspec 3.937 ms (254.0 tok/s, weights "
                    f"read at 41.6 GB/s), llama.cpp 5.022 ms (199.1 tok/s); llama.cpp / splitspec step time, median "
                    f"of pairs {ratio} (range 0.97-1.53); splitspec faster in {won} of 40 pairs\n")
        text = ("## round 1\n" + block("f16", 0.5, 6.0, 160.0, 25.0, 80, 27.0, 120.0, 30.0) + pairs("1.24", 39)
                + block("bf16", 0.5, 7.0, 140.0, 26.0, 75, 27.0, 100.0, 35.0)
                + "## round 2\n" + block("f16", 0.5, 6.0, 150.0, 25.0, 80, 27.0, 160.0, 30.0) + pairs("0.97", 12))
        lines = self.summary(text).splitlines()
        self.assertIn("step-paired", lines[0])
        self.assertEqual(lines[1].count("---"), 8)
        f16 = next(line for line in lines if line.startswith("| F16 |"))
        bf16 = next(line for line in lines if line.startswith("| BF16 |"))
        self.assertTrue(f16.endswith("| 1.24 (39/40), 0.97 (12/40) |"), f16)
        self.assertIn("| 1 of 2 |", f16)  # the rounds' own ratios: 160 / 120 and 150 / 160
        self.assertTrue(bf16.endswith("| - |"), bf16)

    def test_a_block_cut_short_is_left_out(self):
        whole = block("f16", 0.5, 6.0, 160.0, 25.0, 80, 27.0, 120.0, 30.0)
        cut = "\n".join(block("bf16", 0.5, 7.0, 140.0, 26.0, 75, 27.0, 100.0, 35.0).splitlines()[:4]) + "\n"
        summary = self.summary(whole + cut)
        self.assertIn("| F16 |", summary)
        self.assertNotIn("BF16", summary)

    def test_no_complete_block_is_an_error(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("## round 1\n== f32 (load average 0.5 0.5 0.5)\n")
        try:
            self.assertEqual(summarize.main([f.name]), 1)
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    unittest.main()
