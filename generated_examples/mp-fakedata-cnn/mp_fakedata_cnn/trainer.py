"""The training loop: accumulation, mixed precision, clipping, evaluation, saves."""

import contextlib
import sys

import torch
from tqdm import tqdm

from . import state
from .agreement import all_reduce_sum, replicas_in_sync
from .distributed import log
from .divergence import DivergenceWatch
from .evaluation import evaluate
from .metrics import MetricsLog, Throughput
from .model import loss_fn
from .optim import build_optimizer, build_scheduler, steps_per_epoch
from .watchdog import Watchdog

AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class Trainer:
    def __init__(self, config, placement, ddp_model, devices, loaders, stop_request):
        self.config = config
        self.placement = placement
        self.ddp = ddp_model
        self.model = torch.compile(ddp_model) if config.compile else ddp_model
        self.input_device, self.output_device = devices
        self.train_loader, self.eval_loader = loaders
        self.stop_request = stop_request
        self.optimizer = build_optimizer(config, ddp_model, self.input_device)
        full_epoch = steps_per_epoch(
            len(self.train_loader.dataset), config.global_batch_size
        )
        self.scheduler = build_scheduler(config, self.optimizer, full_epoch)
        # fp16 gradients can underflow without loss scaling; bf16 has fp32's range.
        self.scaler = torch.amp.GradScaler(
            self.input_device.type, enabled=config.amp == "fp16"
        )
        self.epoch = 0  # completed epochs
        self.step = 0  # optimizer steps
        self.samples_in_epoch = 0  # positions of the epoch's order, all ranks
        self.step_loss = torch.zeros((), device=self.output_device)
        self.last_loss = None  # the newest step's loss, still on the device
        self.divergence = DivergenceWatch(self.output_device)
        self.watchdog = Watchdog(config, placement)
        self.throughput = Throughput()
        self.metrics_log = MetricsLog(config.run_dir, enabled=placement.is_main)
        self.saved_at_step = self.evaluated_at_step = None
        self.preempted = False  # a stop signal: save within the grace period
        self.last_checkpoint = None
        self.eval_metrics = {}

    def log(self, message):
        log(self.placement, message)

    def autocast(self):
        return torch.autocast(
            self.input_device.type,
            dtype=AMP_DTYPES.get(self.config.amp),
            enabled=self.config.amp != "off",
        )

    def fit(self):
        with self.metrics_log.opened(self.config, self.step):
            while self.epoch < self.config.epochs and not self._reached_max_steps():
                if self._run_epoch():
                    break  # --max-steps or a stop signal
                if self._due(self.epoch, self.config.save_every):
                    self.save_checkpoint()
                if self._due(self.epoch, self.config.eval_every):
                    self.evaluate()
            if self.stop_request.finish():  # a signal in the last step
                self.preempted = True
            if self.saved_at_step != self.step:
                self.save_checkpoint()
            if self.evaluated_at_step != self.step and not self.preempted:
                self.evaluate()  # the final metrics describe the final weights
        return self.summary()

    @staticmethod
    def _due(count, every):
        return every > 0 and count % every == 0

    def _run_epoch(self):
        """Train to the end of the epoch or a stop; True if the run must stop."""
        self.throughput.start()
        stopping = False
        sampler = self.train_loader.sampler
        sampler.start_epoch(self.epoch, consumed=self.samples_in_epoch)
        accum = self.config.grad_accum
        with self.watchdog.armed():
            for micro_step, (inputs, targets) in enumerate(self._progress(sampler)):
                last_in_group = (micro_step + 1) % accum == 0
                self._forward_backward(inputs, targets, accum, sync=last_in_group)
                if last_in_group:
                    self.samples_in_epoch += self.config.global_batch_size
                    self._optimizer_step()
                    if self._due(self.step, self.config.eval_every_steps):
                        self._evaluate_mid_epoch()
                    stopping = self._should_stop()
                    if stopping:
                        break
        if self.samples_in_epoch == sampler.end:  # also after a stop on its last step
            self.epoch += 1
            self.samples_in_epoch = 0
        self._wait_for_devices()
        self.throughput.stop()
        return stopping

    def _progress(self, sampler):
        """The epoch's batches; a bar on rank 0's terminal, none in logs."""
        per_batch = self.config.batch_size * self.placement.world_size
        return tqdm(
            self.train_loader,
            desc=f"epoch {self.epoch}",
            initial=sampler.start // per_batch,
            total=sampler.end // per_batch,
            disable=not (self.placement.is_main and sys.stderr.isatty()),
            leave=False,
        )

    def _evaluate_mid_epoch(self):
        """Evaluate with the training clock stopped: rates count training only."""
        self._wait_for_devices()
        self.throughput.stop()
        with self.watchdog.paused():
            self.evaluate()
        self.throughput.start()

    def _wait_for_devices(self):
        """Let queued GPU work finish, so the training time includes it."""
        for device in {self.input_device, self.output_device}:
            if device.type == "cuda":
                torch.cuda.synchronize(device)

    def _forward_backward(self, inputs, targets, group_size, sync):
        # DDP all-reduces gradients in backward; skip that on all but the last
        # micro-step of the group, whose backward reduces the accumulated sum.
        context = contextlib.nullcontext() if sync else self.ddp.no_sync()
        with context:
            with self.autocast():
                outputs = self.model(inputs.to(self.input_device, non_blocking=True))
                targets = targets.to(self.output_device, non_blocking=True)
                loss = loss_fn(outputs.float(), targets) / group_size
            self.scaler.scale(loss).backward()
        self.step_loss += loss.detach()
        self.throughput.count(len(inputs) * self.placement.world_size)

    def _optimizer_step(self):
        lr = self.optimizer.param_groups[0]["lr"]  # this step's
        if self.config.clip_grad_norm > 0:
            self.scaler.unscale_(self.optimizer)  # clip the true gradients
            torch.nn.utils.clip_grad_norm_(
                self.ddp.parameters(), self.config.clip_grad_norm
            )
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.step += 1
        self.watchdog.stepped()
        self.divergence.observe(self.step_loss, self.step)
        self.last_loss = self.step_loss
        self.step_loss = torch.zeros((), device=self.output_device)
        if self.step % self.config.log_every == 0:
            self._log_training(lr)

    def _log_training(self, lr):
        """Waits for the device and all-reduces: on logging steps only."""
        self.divergence.check(self.step)
        loss = self._mean_over_ranks(self.last_loss)
        record = self._record() | {"loss": loss, "lr": lr}
        record["samples_per_second"] = self.throughput.since_last_call()
        self.metrics_log.write(record)
        self.log(f"step {self.step} loss {loss:.4f} lr {lr:.3g}")

    def _record(self):
        """What every metrics.jsonl record starts with."""
        world_size = self.placement.world_size
        return {"step": self.step, "epoch": self.epoch, "world_size": world_size}

    def _mean_over_ranks(self, value):
        total = all_reduce_sum([float(value)], self.output_device)[0]
        return total / self.placement.world_size

    def _reached_max_steps(self):
        # Every rank counts the same steps: no need to agree.
        return 0 < self.config.max_steps <= self.step

    def _should_stop(self):
        if self._reached_max_steps():
            return True
        signal_name = self.stop_request.agreed()
        if signal_name:
            self.log(
                f"{signal_name}: stopping at step {self.step} to save a "
                "checkpoint (a second Ctrl-C quits at once)"
            )
            self.preempted = True
            return True
        return False

    def evaluate(self):
        if not len(self.eval_loader.dataset):
            return  # --eval-size 0: no evaluation
        devices = (self.input_device, self.output_device)
        metrics = evaluate(self.model, self.eval_loader, self.autocast, devices)
        self.evaluated_at_step = self.step
        self.eval_metrics = {"eval_step": self.step} | metrics
        self.metrics_log.write(self._record() | metrics)
        shown = ", ".join(
            f"{k} {v:.4g}" for k, v in self.eval_metrics.items() if v is not None
        )
        self.log(f"eval after epoch {self.epoch}, step {self.step}: {shown}")

    def save_checkpoint(self):
        state.save(self)

    def resume(self, point):
        state.resume(self, point)

    def summary(self):
        """The metrics-file contents; a collective, so every rank calls it."""
        final_loss = None  # no step ran (a resume of a finished run)
        if self.last_loss is not None:
            final_loss = self._mean_over_ranks(self.last_loss)
        return {
            "world_size": self.placement.world_size,
            "steps": self.step,
            "epochs": self.epoch,
            "final_loss": final_loss,
            "samples_per_second": self.throughput.overall(),
            "train_seconds": self.throughput.seconds,
            "checkpoint": str(self.last_checkpoint),
            "replicas_in_sync": replicas_in_sync(self.ddp, self.input_device),
            "threads_per_process": torch.get_num_threads(),
        } | self.eval_metrics
