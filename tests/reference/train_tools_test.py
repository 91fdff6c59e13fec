#!/usr/bin/python3
"""Tests of the training tools that the bundled pair depends on (tools/train/): growing a model
keeps its function and leaves no weight stuck; the fast training attention equals the reference
attention; a stage interrupted and resumed ends with the same weights as one run straight through;
a run continued from an earlier pair (--start-from) keeps its tokenizer and says which stages ran.

  /usr/bin/python3 tests/reference/train_tools_test.py
"""

import os
import signal
import sys
import tempfile
import unittest

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "train"))

import fast_attention  # noqa: E402
import grow  # noqa: E402
import llama_reference as ref  # noqa: E402
import resumable  # noqa: E402
import train_pair  # noqa: E402


def config(**kw):
    base = dict(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=2, head_dim=8,
                num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False, rms_norm_eps=1e-5)
    base.update(kw)
    return ref.LlamaConfig(**base)


def trained_looking_model(cfg, seed):
    """Random weights with non-trivial norms, so a wrong norm rescaling would show."""
    model = ref.LlamaForCausalLM(cfg)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (0.3 if name.endswith("norm.weight") else 0.1)
                    + (1.0 if name.endswith("norm.weight") else 0.0))
    return model


class GrowTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.small = trained_looking_model(config(), 1)
        self.tokens = torch.randint(0, 97, (2, 23))

    def grown(self, **kw):
        return grow.grow(self.small, config(**kw), seed=5)

    def test_wider_and_deeper_model_computes_the_same_logits(self):
        big = self.grown(hidden_size=64, intermediate_size=96, num_hidden_layers=5,
                         num_attention_heads=8, num_key_value_heads=4)
        with torch.no_grad():
            want, got = self.small(self.tokens), big(self.tokens)
        self.assertLess((want - got).abs().max().item(), 1e-4 * want.abs().max().item())

    def test_keeping_eps_would_change_the_function(self):
        """The eps rescaling is load-bearing: with the small model's eps the logits move."""
        big = self.grown(hidden_size=64)
        big.config.rms_norm_eps = self.small.config.rms_norm_eps
        for module in big.modules():
            if isinstance(module, ref.RMSNorm):
                module.eps = self.small.config.rms_norm_eps
        self.small.model.embed_tokens.weight.data.mul_(0.01)  # small activations, as early in training
        big_embed = big.model.embed_tokens.weight.data
        big_embed[:, :32].mul_(0.01)
        with torch.no_grad():
            diff = (self.small(self.tokens) - big(self.tokens)).abs().max().item()
        self.assertGreater(diff, 1e-3)

    def test_no_weight_is_stuck(self):
        """Zero writers get a gradient at once; the readers behind them (and a new layer's norms)
        from the step after, once their writer has moved. A zero reader AND writer would be a
        saddle that never moves."""
        big = self.grown(hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                         num_attention_heads=8, num_key_value_heads=4)
        opt = torch.optim.SGD(big.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            logits = big(self.tokens)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 97), self.tokens.roll(-1, 1).reshape(-1))
            loss.backward()
            opt.step()
        for name, p in big.named_parameters():
            self.assertGreater(p.grad.abs().max().item(), 0.0, name)

    def test_rejects_a_different_head_dim(self):
        with self.assertRaisesRegex(ValueError, "head_dim"):
            self.grown(hidden_size=64, head_dim=16)

    def test_rejects_a_different_query_group(self):
        with self.assertRaisesRegex(ValueError, "query heads per KV head"):
            self.grown(num_attention_heads=8)


class FastAttentionTest(unittest.TestCase):
    def test_equals_the_reference_forward_and_gradient(self):
        torch.manual_seed(0)
        reference = trained_looking_model(config(num_attention_heads=6, num_key_value_heads=2), 3)
        fast = trained_looking_model(config(num_attention_heads=6, num_key_value_heads=2), 3)
        fast_attention.use_fast_attention(fast)
        tokens = torch.randint(0, 97, (3, 17))
        want, got = reference(tokens), fast(tokens)
        self.assertLess((want - got).abs().max().item(), 1e-5)
        want.sum().backward()
        got.sum().backward()
        for (name, a), (_, b) in zip(reference.named_parameters(), fast.named_parameters()):
            self.assertLess((a.grad - b.grad).abs().max().item(), 1e-5 * a.grad.abs().max().item(), name)


class ResumableTest(unittest.TestCase):
    STEPS = 12

    def run_stage(self, work, stop_at=None):
        torch.manual_seed(0)
        model = ref.LlamaForCausalLM(config())
        train_pair.init_weights(model, 7)
        streams = {"a": torch.randint(3, 97, (400,)), "b": torch.randint(3, 97, (300,))}
        sampler = train_pair.Batches(streams, 16, 2, {"a": 0.6, "b": 0.4}, seed=11, repeat_fraction=0.3)
        plain_loss = train_pair.next_token_loss("cpu", "fp32")
        calls = {"n": 0}

        def step_loss(m, batch):
            calls["n"] += 1
            if stop_at is not None and calls["n"] == stop_at:
                os.kill(os.getpid(), signal.SIGTERM)  # as `kill` would, mid-step
            return plain_loss(m, batch)

        resumable.run_stage("stage", work, model, train_pair.make_optimizer(model, 1e-2), sampler, self.STEPS,
                            lambda step: train_pair.lr_at(step, self.STEPS, 1e-2), step_loss,
                            resumable.TrainLog(work), checkpoint_seconds=1e9)
        return model.state_dict()

    def test_interrupted_and_resumed_run_ends_with_the_same_weights(self):
        with tempfile.TemporaryDirectory() as straight, tempfile.TemporaryDirectory() as parts:
            want = self.run_stage(straight)
            with self.assertRaises(resumable.Interrupted):
                self.run_stage(parts, stop_at=5)
            with open(os.path.join(parts, "train.log")) as f:
                self.assertIn("stage checkpoint step=5", f.read())
            got = self.run_stage(parts)
            with open(os.path.join(parts, "train.log")) as f:
                self.assertIn("stage resume step=5", f.read())
            for name in want:
                self.assertTrue(torch.equal(want[name], got[name]), name)

    def test_a_finished_stage_is_not_trained_again(self):
        with tempfile.TemporaryDirectory() as work:
            first = self.run_stage(work)
            again = self.run_stage(work, stop_at=1)  # would raise if a step ran
            for name in first:
                self.assertTrue(torch.equal(first[name], again[name]), name)


class StartFromTest(unittest.TestCase):
    def test_the_earlier_pairs_tokenizer_is_reused(self):
        with tempfile.TemporaryDirectory() as earlier, tempfile.TemporaryDirectory() as work:
            os.makedirs(os.path.join(earlier, "target"))
            with open(os.path.join(earlier, "target", "tokenizer.model"), "wb") as f:
                f.write(b"earlier pieces")
            train_pair.reuse_tokenizer(earlier, work)
            with open(os.path.join(work, "tokenizer.model"), "rb") as f:
                self.assertEqual(f.read(), b"earlier pieces")

    def test_an_earlier_pair_without_a_tokenizer_is_refused(self):
        with tempfile.TemporaryDirectory() as earlier, tempfile.TemporaryDirectory() as work:
            with self.assertRaises(SystemExit):
                train_pair.reuse_tokenizer(earlier, work)
            self.assertFalse(os.path.exists(os.path.join(work, "tokenizer.model")))

    def test_a_work_dir_does_not_resume_a_run_from_another_start(self):
        preset = train_pair.PRESETS["smoke"]
        with tempfile.TemporaryDirectory() as work:
            train_pair.check_work_dir(work, "smoke", preset, 1, "/pairs/a")
            train_pair.check_work_dir(work, "smoke", preset, 1, "/pairs/a")
            with self.assertRaises(SystemExit):
                train_pair.check_work_dir(work, "smoke", preset, 1, "/pairs/b")
            with self.assertRaises(SystemExit):
                train_pair.check_work_dir(work, "smoke", preset, 1)

    def stage_lines(self, start_from):
        p = train_pair.PRESETS["smoke"]
        facts = {key: p[key] for key in ("seq_len", "batch", "seed_seq_len", "seed_batch", "seed_steps", "seed_lr",
                                         "target_steps", "target_lr", "anneal_steps", "anneal_lr", "anneal_mixture",
                                         "draft_steps", "draft_lr")}
        facts["seed_config"] = p["seed"]
        if start_from:
            facts["start_from"] = start_from
        return "\n".join(train_pair.training_stage_lines(facts))

    def test_the_report_says_which_stages_ran(self):
        continued = self.stage_lines("models/")
        self.assertIn("not rerun", continued)
        self.assertIn("--start-from models/", continued)
        self.assertIn("continued from the earlier draft", continued)
        self.assertIn("- anneal:", continued)
        fresh = self.stage_lines(None)
        self.assertIn("- seed:", fresh)
        self.assertNotIn("not rerun", fresh)
        self.assertNotIn("continued from", fresh)


if __name__ == "__main__":
    torch.set_num_threads(1)
    unittest.main()
