"""The training loop of ``refine tune``, on accelerate.

:class:`TrainLoop` owns what accelerate does for the tune: the processes (one, or several
under ``accelerate launch`` or ``torchrun``, each with its device; gradients averaged by
accelerate's wrapper of the denoiser), mixed precision (autocast on the denoiser, loss
scaling for fp16), gradient accumulation, gradient clipping, trackers (``report_to``:
tensorboard, wandb, ... when installed) and the barriers between processes. It also keeps
the step, the history (step, loss, reward accuracy, gradient norm) and the checkpoint
(``checkpoint.pt``: adapter, optimiser, step, history, settings), written atomically by the
first process.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from refine.backends.device import pick_device
from refine.io.files import atomic_write

if TYPE_CHECKING:
    from refine.train.config import TuneConfig
    from refine.train.denoiser import Denoiser

# one history entry: step, loss, reward accuracy (None for sft), gradient norm before clipping
Record = tuple[int, float, float | None, float | None]
# settings a resumed tune may change
FREE_ON_RESUME = ("steps", "validate_every", "checkpoint_every", "report_to")
MAX_GRAD_NORM = 1.0


def trackers_of(report_to: str) -> list[str]:
    """The accelerate trackers named in ``report_to`` (comma-separated; ``all``: those
    installed; ``none``: none); ValueError naming an unknown one or one not installed."""
    names = [x.strip() for x in report_to.split(",") if x.strip() and x.strip() != "none"]
    if not names:
        return []
    from accelerate.tracking import get_available_trackers
    from accelerate.utils import LoggerType

    known = [x for x in LoggerType.list() if x != "all"]
    installed = {LoggerType(x).value for x in get_available_trackers()}
    for name in names:
        if name != "all" and name not in known:
            raise ValueError(f"report to {name!r}: not a tracker ({', '.join(known)}, all)")
        if name != "all" and name not in installed:
            raise ValueError(f"report to {name}: its package is not installed (pip install {name})")
    return names


def precision_of(asked: str, device: Any) -> str:
    """The mixed precision a tune runs in: ``auto`` is bf16 on a GPU that has it, else none
    (fp16 needs loss scaling, so it is asked for)."""
    import torch

    if asked != "auto":
        return asked
    return "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "no"


class TrainLoop:
    """The optimisation of a denoiser's adapter (see the module docstring). ``extra``
    trackers are accelerate ``GeneralTracker`` objects, beside those ``report_to`` names."""

    def __init__(
        self,
        config: TuneConfig,
        emit: Callable[[dict], None] | None = None,
        extra: list[Any] | tuple[Any, ...] = (),
    ):
        import torch
        from accelerate import Accelerator
        from accelerate.state import AcceleratorState, GradientState

        self.c = config
        self.emit = emit or (lambda info: None)
        world = int(os.environ.get("WORLD_SIZE", "1"))
        want = torch.device(config.device or pick_device())
        if world == 1:
            # accelerate keeps its settings for the life of a process, and one process (the
            # app, the tests) may tune several times, with other settings
            AcceleratorState._reset_state(reset_partial_state=True)
            GradientState._reset_state()
        log_with = [*trackers_of(config.report_to), *extra]
        self.accelerator = Accelerator(
            cpu=want.type == "cpu",
            mixed_precision=precision_of(config.mixed_precision, want),
            gradient_accumulation_steps=config.grad_accum,
            device_placement=False,  # the denoiser is placed where it loads
            log_with=log_with or None,
            project_dir=config.out,
        )
        self.rank = self.accelerator.process_index
        self.world = self.accelerator.num_processes
        # launched as several processes: each its own device (accelerate's); else the asked one
        self.device = self.accelerator.device if self.world > 1 else want
        self.step = 0
        self.history: list[Record] = []
        self.out = Path(config.out)

    @property
    def main(self) -> bool:
        """This process writes the outputs (the only one, unless launched as several)."""
        return self.rank == 0

    def attach(self, model: Denoiser) -> None:
        """Train ``model``'s adapter: its optimiser, and the wrapper (several processes:
        gradients averaged; mixed precision: autocast) that its passes with gradients call."""
        import torch

        self.model = model
        optimizer = torch.optim.AdamW(model.params, lr=self.c.lr)
        self.wrapped, self.optimizer = self.accelerator.prepare(model.unet, optimizer)
        model.forward = self.wrapped

    def wait(self) -> None:
        """Until every process is here."""
        self.accelerator.wait_for_everyone()

    # -- steps --------------------------------------------------------------------------

    def one_step(self, loss_of: Callable[[int], tuple[Any, float | None]]) -> Record:
        """One optimiser step over ``grad_accum`` micro-batches; ``loss_of(k)`` is the loss
        and reward accuracy of micro-batch ``k`` of the tune."""
        acc = self.accelerator
        total, accs, norm = 0.0, [], None
        for micro in range(self.c.grad_accum):
            with acc.accumulate(self.wrapped):
                loss, accuracy = loss_of(self.step * self.c.grad_accum + micro)
                acc.backward(loss)  # divided by grad_accum, scaled for fp16
                total += loss.item() / self.c.grad_accum
                if accuracy is not None:
                    accs.append(accuracy)
                if acc.sync_gradients:
                    norm = float(acc.clip_grad_norm_(self.model.params, MAX_GRAD_NORM))
                self.optimizer.step()  # on the last micro-batch only
                self.optimizer.zero_grad(set_to_none=True)
        if self.world > 1:
            total, accs = self._average(total, accs)
        self.step += 1
        return (self.step, total, sum(accs) / len(accs) if accs else None, norm)

    def _average(self, total: float, accs: list[float]) -> tuple[float, list[float]]:
        """The step's loss and reward accuracy averaged over the processes."""
        import torch

        acc = sum(accs) / len(accs) if accs else -1.0
        stats = torch.tensor([total, acc], dtype=torch.float64, device=self.device)
        stats = self.accelerator.reduce(stats, reduction="mean")
        return float(stats[0]), ([float(stats[1])] if accs else [])

    def train(
        self,
        loss_of: Callable[[int], tuple[Any, float | None]],
        after: Callable[[int], None] = lambda step: None,
    ) -> None:
        """Steps until ``steps``: each reported (``emit``, trackers), checkpointed every
        ``checkpoint_every``; ``after(step)`` then runs on every process."""
        self.accelerator.init_trackers(
            "refine-tune", config={k: v for k, v in self.c.model_dump().items() if v is not None}
        )
        start = time.perf_counter()
        self.wrapped.train()
        while self.step < self.c.steps:
            record = self.one_step(loss_of)
            self.history.append(record)
            step, loss, accuracy, norm = record
            if not math.isfinite(loss):
                raise ValueError(f"the loss is {loss} at step {step}: lower --lr")
            values = {"loss": loss, "grad_norm": norm}
            if accuracy is not None:
                values["accuracy"] = accuracy
            self.accelerator.log(values, step=step)
            if self.main:
                self.emit(
                    {
                        **values,
                        "step": step,
                        "steps": self.c.steps,
                        "accuracy": accuracy,
                        "elapsed_s": time.perf_counter() - start,
                    }
                )
            if self.c.checkpoint_every and step % self.c.checkpoint_every == 0:
                if self.main:
                    self.checkpoint()
                self.wait()
            after(step)
        self.wrapped.eval()

    def release(self) -> None:
        """The denoiser as it was before accelerate wrapped it (its own forward, without
        autocast)."""
        self.accelerator.unwrap_model(self.wrapped, keep_fp32_wrapper=False)
        self.model.forward = self.model.unet

    def close(self, failed: bool = False) -> None:
        """Once every process is here (not after a failure), the trackers closed and the
        processes' group left."""
        if failed:
            for tracker in self.accelerator.trackers:
                tracker.finish()
            return
        self.wait()
        self.accelerator.end_training()

    # -- checkpoints --------------------------------------------------------------------

    def checkpoint(self) -> None:
        import torch

        state = {
            "step": self.step,
            "lora": self.model.lora_state(),
            "optimizer": self.optimizer.state_dict(),
            "losses": self.history,
            "config": self.c.model_dump(),
        }
        if self.accelerator.scaler is not None:
            state["scaler"] = self.accelerator.scaler.state_dict()
        atomic_write(self.out / "checkpoint.pt", lambda tmp: torch.save(state, tmp))

    def restore(self) -> None:
        """Go on from ``checkpoint.pt``; ValueError when it was made with other settings."""
        import torch

        path = self.out / "checkpoint.pt"
        state = torch.load(path, map_location=self.device, weights_only=False)
        same = {k: v for k, v in state["config"].items() if k not in FREE_ON_RESUME}
        mine = {k: v for k, v in self.c.model_dump().items() if k in same}
        if same != mine:
            changed = sorted(k for k in same if same[k] != mine[k])
            raise ValueError(f"the checkpoint was made with other settings ({', '.join(changed)})")
        self.model.load_lora_state(state["lora"])
        self.optimizer.load_state_dict(state["optimizer"])
        if "scaler" in state and self.accelerator.scaler is not None:
            self.accelerator.scaler.load_state_dict(state["scaler"])
        self.step = state["step"]
        # checkpoints before the gradient norm was kept hold three fields
        self.history = [(*x, None)[:4] for x in state["losses"]]
