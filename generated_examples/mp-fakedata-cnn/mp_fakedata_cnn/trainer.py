"""The training loop: accumulation, mixed precision, clipping, evaluation, saves."""

import contextlib
import sys
import time

import torch
import torch.distributed as dist
from tqdm import tqdm

from . import checkpoint
from .config import ConfigError
from .distributed import all_reduce_sum, raise_if_any_failed
from .model import METRICS, batch_metrics, loss_fn

AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def warmup(steps):
    """Linear warm-up, then constant: independent of the run's length, so a
    resumed run with more epochs follows the same schedule."""
    return lambda step: min(1.0, (step + 1) / (steps + 1))


class Trainer:
    def __init__(self, config, placement, ddp_model, devices, loaders, stop_request):
        self.config = config
        self.placement = placement
        self.ddp = ddp_model
        self.model = torch.compile(ddp_model) if config.compile else ddp_model
        self.input_device, self.output_device = devices
        self.train_loader, self.eval_loader = loaders
        self.stop_request = stop_request
        self.optimizer = torch.optim.SGD(
            ddp_model.parameters(),
            lr=config.lr,
            momentum=config.momentum,
            weight_decay=config.weight_decay,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, warmup(config.warmup_steps)
        )
        # fp16 gradients can underflow without loss scaling; bf16 has fp32's range.
        self.scaler = torch.amp.GradScaler(
            self.input_device.type, enabled=config.amp == "fp16"
        )
        self.epoch = 0  # completed epochs
        self.step = 0  # optimizer steps
        self.batch_in_epoch = 0  # micro-batches done in the current epoch
        self.step_loss = torch.zeros((), device=self.output_device)
        self.last_loss = None  # the newest step's loss, still on the device
        self.samples_this_run = 0  # on this rank
        self.train_seconds = 0.0  # in the training loop only: no eval, no saves
        self.saved_at_step = None
        self.evaluated_at_step = None
        self.preempted = False  # SIGTERM: save within the grace period, no more
        self.last_checkpoint = None
        self.eval_metrics = {}

    def log(self, message):
        if self.placement.is_main:
            tqdm.write(message)
            sys.stdout.flush()  # Slurm and CI logs show it now, not at exit

    def show_progress(self):
        """A progress bar on rank 0's terminal; plain log lines in Slurm or CI
        logs, where a bar would be glued to them."""
        return self.placement.is_main and sys.stderr.isatty()

    def autocast(self):
        return torch.autocast(
            self.input_device.type,
            dtype=AMP_DTYPES.get(self.config.amp),
            enabled=self.config.amp != "off",
        )

    def fit(self):
        while self.epoch < self.config.epochs and not self._reached_max_steps():
            if self._run_epoch():
                break  # --max-steps or SIGTERM
            if self._due(self.config.save_every):
                self.save_checkpoint()
            if self._due(self.config.eval_every):
                self.evaluate()
        if self.saved_at_step != self.step:
            self.save_checkpoint()
        if self.evaluated_at_step != self.step and not self.preempted:
            self.evaluate()  # the final metrics describe the final weights
        return self.summary()

    def _due(self, every):
        return every > 0 and self.epoch % every == 0

    def _run_epoch(self):
        """Train to the end of the epoch or a stop; True if the run must stop."""
        started = time.perf_counter()
        stopping = False
        sampler = self.train_loader.sampler
        sampler.start_epoch(
            self.epoch, skip=self.batch_in_epoch * self.config.batch_size
        )
        total = self.batch_in_epoch + len(self.train_loader)
        batches = tqdm(
            self.train_loader,
            desc=f"epoch {self.epoch}",
            initial=self.batch_in_epoch,
            total=total,
            disable=not self.show_progress(),
            leave=False,
        )
        for inputs, targets in batches:
            accum = self.config.grad_accum
            group_start = self.batch_in_epoch - self.batch_in_epoch % accum
            group_size = min(accum, total - group_start)
            last_in_group = self.batch_in_epoch + 1 == group_start + group_size
            self._forward_backward(inputs, targets, group_size, sync=last_in_group)
            self.batch_in_epoch += 1
            if last_in_group:
                self._optimizer_step()
                stopping = self._should_stop()
                if stopping:
                    break
        if self.batch_in_epoch == total:  # also when a stop came on its last step
            self.epoch += 1
            self.batch_in_epoch = 0
        self._wait_for_devices()
        self.train_seconds += time.perf_counter() - started
        return stopping

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
        self.samples_this_run += len(inputs)

    def _optimizer_step(self):
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
        self.last_loss = self.step_loss
        self.step_loss = torch.zeros((), device=self.output_device)
        if self.step % self.config.log_every == 0:
            # .item() waits for the device: only on logging steps, only on rank 0.
            lr = self.scheduler.get_last_lr()[0]
            self.log(f"step {self.step} loss {self.last_loss.item():.4f} lr {lr:.3g}")

    def _reached_max_steps(self):
        # Every rank counts the same steps: no need to agree.
        return 0 < self.config.max_steps <= self.step

    def _should_stop(self):
        if self._reached_max_steps():
            return True
        if self.stop_request.agreed():
            self.log(f"SIGTERM: stopping at step {self.step} to save a checkpoint")
            self.preempted = True
            return True
        return False

    @torch.no_grad()
    def evaluate(self):
        """Metrics over the whole evaluation set, each sample counted once."""
        model = checkpoint.unwrap(self.model)  # no DDP: evaluation needs no sync
        model.eval()
        sums = dict.fromkeys(METRICS, 0.0)
        count = 0
        for inputs, targets in self.eval_loader:
            with self.autocast():
                outputs = model(inputs.to(self.input_device, non_blocking=True))
            targets = targets.to(self.output_device, non_blocking=True)
            for name, value in batch_metrics(outputs, targets).items():
                sums[name] = sums[name] + value
            count += len(targets)
        model.train()
        totals = all_reduce_sum(
            [count] + [float(sums[name]) for name in METRICS], self.output_device
        )
        samples = int(totals[0])
        self.evaluated_at_step = self.step
        self.eval_metrics = {"eval_step": self.step, "eval_samples": samples} | {
            f"eval_{name}": total / samples if samples else None
            for name, total in zip(METRICS, totals[1:], strict=True)
        }
        shown = ", ".join(
            f"{k} {v:.4g}" for k, v in self.eval_metrics.items() if v is not None
        )
        self.log(f"eval after epoch {self.epoch}, step {self.step}: {shown}")

    def state_dict(self, rng_states):
        return {
            "model": checkpoint.unwrap(self.model).state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "epoch": self.epoch,
            "step": self.step,
            "batch_in_epoch": self.batch_in_epoch,
            "world_size": self.placement.world_size,
            "batch_size": self.config.batch_size,
            "rng": rng_states,
        }

    def save_checkpoint(self):
        rng_states = [None] * self.placement.world_size
        dist.all_gather_object(rng_states, rng_state())  # every rank's stream
        error = None
        if self.placement.is_main:
            try:
                self.last_checkpoint = checkpoint.save(
                    self.state_dict(rng_states),
                    self.config.checkpoint_dir,
                    self.step,
                    self.config.keep_last,
                )
                self.log(f"saved {self.last_checkpoint}")
            except OSError as failure:
                folder = self.config.checkpoint_dir
                error = f"cannot save a checkpoint in {folder}: {failure}"
        # Also a barrier: no rank goes on (or resumes) before the file is complete.
        raise_if_any_failed(error, self.placement)
        self.saved_at_step = self.step

    def restore(self, state):
        self._check_same_shards(state)
        checkpoint.unwrap(self.model).load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if state["scaler"]:  # empty when saved with --amp off or bf16
            self.scaler.load_state_dict(state["scaler"])
        self.epoch = state["epoch"]
        self.step = state["step"]
        self.batch_in_epoch = state.get("batch_in_epoch", 0)
        self.saved_at_step = self.step
        rng_states = state["rng"]
        set_rng_state(rng_states[self.placement.rank % len(rng_states)])

    def _check_same_shards(self, state):
        """Mid-epoch, the samples already seen are counted in this job's shards:
        another world size or batch size would skip the wrong ones."""
        if not state.get("batch_in_epoch"):
            return  # an epoch boundary: any layout resumes
        saved = (state["world_size"], state.get("batch_size", self.config.batch_size))
        now = (self.placement.world_size, self.config.batch_size)
        if saved != now:
            raise ConfigError(
                f"the checkpoint was saved mid-epoch by {saved[0]} processes at "
                f"--batch-size {saved[1]}; resume it with the same, or resume an "
                f"epoch-end checkpoint ({now[0]} processes, --batch-size {now[1]} now)"
            )

    def resume(self):
        """Load the checkpoint rank 0 chose, on every rank."""
        choice = [None, None]  # (path, error)
        if self.placement.is_main:
            try:
                path, state = checkpoint.find_resume_point(
                    self.config.resume, self.config.checkpoint_dir
                )
                choice = [str(path) if path else None, None]
                self._set_aside_other_runs(state["step"] if path else 0)
            except SystemExit as error:
                choice = [None, str(error)]
            except OSError as error:
                choice = [None, f"{self.config.checkpoint_dir}: {error}"]
        dist.broadcast_object_list(choice, src=0)
        path, error = choice
        if error:
            raise SystemExit(error)
        if path is None:
            return
        error = None
        if not self.placement.is_main:
            try:
                state = checkpoint.load(path)
            except ValueError as failure:
                error = (
                    f"cannot read {path}: {failure} (every node must see the "
                    "checkpoint folder: put it on shared storage)"
                )
        raise_if_any_failed(error, self.placement)
        self.restore(state)
        self.last_checkpoint = path
        self.log(f"resumed from {path}: epoch {self.epoch}, step {self.step}")

    def _set_aside_other_runs(self, start_step):
        aside = checkpoint.set_aside_newer(self.config.checkpoint_dir, start_step)
        if aside:
            self.log(
                f"moved checkpoints past step {start_step} (another run) to {aside}"
            )

    def summary(self):
        """The metrics-file contents; a collective, so every rank calls it."""
        world_size = self.placement.world_size
        final_loss = None  # no step ran (a resume of a finished run)
        if self.last_loss is not None:
            loss_sum = all_reduce_sum([float(self.last_loss)], self.output_device)[0]
            final_loss = loss_sum / world_size
        samples = self.samples_this_run * world_size  # equal shards on all ranks
        return {
            "world_size": world_size,
            "steps": self.step,
            "epochs": self.epoch,
            "final_loss": final_loss,
            "samples_per_second": (
                samples / self.train_seconds if self.train_seconds > 0 else 0.0
            ),
            "train_seconds": self.train_seconds,
            "checkpoint": str(self.last_checkpoint),
            "replicas_in_sync": replicas_in_sync(self.ddp),
            "threads_per_process": torch.get_num_threads(),
        } | self.eval_metrics


def rng_state():
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state):
    torch.set_rng_state(state["torch"])
    if "cuda" in state and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])


@torch.no_grad()
def replicas_in_sync(model):
    """Whether every rank holds bit-identical parameters (DDP's promise)."""
    fingerprint = [
        (float(p.double().sum()), float(p.double().square().sum()))
        for p in model.parameters()
    ]
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, fingerprint)
    return all(other == gathered[0] for other in gathered)
