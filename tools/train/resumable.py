"""A training stage that can be stopped and resumed without changing its result.

Every `checkpoint_seconds` (and on SIGTERM / SIGINT) the stage writes WORK/<name>.ckpt.pt:
model and optimiser state, the batch sampler's random state, the step reached and the wall time
spent so far. Rerunning with the same arguments continues from there; with the same thread count
the weights come out as they would have without the interruption (no other randomness is used
after initialisation). Each log line in WORK/train.log carries the stage, step, smoothed loss,
learning rate and cumulative wall time, so a run made in parts can be checked from its log.
"""

import os
import signal
import time

import torch

from progress import Progress


class Interrupted(Exception):
    """Raised after a checkpoint was written because the process was asked to stop."""


class _StopFlag:
    def __init__(self):
        self.stop = False
        self._old = {}

    def __enter__(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        self.stop = True

    def __exit__(self, *exc):
        for sig, handler in self._old.items():
            signal.signal(sig, handler)


def _save_atomically(state, path):
    tmp = path + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)


class TrainLog:
    def __init__(self, work):
        self.path = os.path.join(work, "train.log")

    def write(self, line):
        with open(self.path, "a", encoding="utf-8") as f:
            f.write("%s %s\n" % (time.strftime("%Y-%m-%d %H:%M:%S"), line))


def run_stage(name, work, model, optimizer, sampler, steps, lr_at, step_loss, log,
              checkpoint_seconds=300, log_every=25, evaluate=None, evaluate_every=0):
    """Trains `model` for `steps` steps of `step_loss(model, sampler.next())`, resuming from
    WORK/<name>.ckpt.pt when it exists. Returns the stage's total wall time in seconds.

    lr_at(step) gives the learning rate; evaluate(model) -> str is logged every evaluate_every
    steps (and at the end) when given."""
    ckpt_path = os.path.join(work, name + ".ckpt.pt")
    start_step, elapsed_before, smoothed = 0, 0.0, None
    if os.path.exists(ckpt_path):
        state = torch.load(ckpt_path)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        sampler.generator.set_state(state["sampler"])
        start_step, elapsed_before, smoothed = state["step"], state["elapsed"], state["smoothed"]
        log.write("%s resume step=%d elapsed=%.1f" % (name, start_step, elapsed_before))
        if start_step >= steps:
            return elapsed_before

    def checkpoint(step, elapsed):
        _save_atomically({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                          "sampler": sampler.generator.get_state(), "step": step,
                          "elapsed": elapsed, "smoothed": smoothed}, ckpt_path)
        log.write("%s checkpoint step=%d elapsed=%.1f" % (name, step, elapsed))

    model.train()
    bar = Progress(steps, name)
    bar.step = start_step
    t0 = time.time()
    last_checkpoint = t0
    with _StopFlag() as flag:
        for step in range(start_step, steps):
            lr = lr_at(step)
            for group in optimizer.param_groups:
                group["lr"] = lr
            loss = step_loss(model, sampler.next())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            value = loss.item()
            smoothed = value if smoothed is None else 0.95 * smoothed + 0.05 * value
            bar.update(1, loss=smoothed)
            done = step + 1
            elapsed = elapsed_before + time.time() - t0
            if done % log_every == 0 or done == steps:
                log.write("%s step=%d loss=%.4f lr=%.3g elapsed=%.1f" % (name, done, smoothed, lr, elapsed))
            if evaluate is not None and evaluate_every and (done % evaluate_every == 0 or done == steps):
                log.write("%s step=%d eval %s" % (name, done, evaluate(model)))
                model.train()
            now = time.time()
            if done == steps or flag.stop or now - last_checkpoint >= checkpoint_seconds:
                checkpoint(done, elapsed)
                last_checkpoint = now
            if flag.stop and done < steps:
                bar.close()
                raise Interrupted("%s stopped at step %d of %d; rerun the same command to continue" %
                                  (name, done, steps))
    bar.close()
    return elapsed_before + time.time() - t0
