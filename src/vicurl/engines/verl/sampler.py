"""The training sampler of the verl engine for curricula that choose each step's prompts (AdaRFT, SENT).

verl's legacy trainer draws each step's prompts from a ``StatefulDataLoader`` over the training
set, with the sampler the trainer is built with (``RayPPOTrainer(train_sampler=...)``).
``CurriculumSampler`` yields, for the step about to run, the dataset indices of the prompts the
curriculum proposes: ``curriculum.propose(step, default_ids)``, the very call of the local engine
(``LocalTrainer.train_step``), ``default_ids`` the local engine's default order
(`vicurl.engines.step.batch_indices`). The same curriculum object is the hook's
(`vicurl.engines.verl.hook.Hook`), which feeds it the step's rewards (``observe``) in
``_update_actor``.

Timing: the batch's indices are drawn lazily, when the dataloader asks for the first index of a
batch. With ``data.dataloader_num_workers=0`` (the launcher sets it for these curricula; the
trainer refuses anything else) torchdata's single-process iterator asks for a batch's indices
only when ``fit``'s ``for batch_dict in self.train_dataloader`` wants the next batch, i.e. after
the previous step's ``_update_actor`` (and its ``observe``) returned. Worker processes would
prefetch ``prefetch_factor`` batches ahead, before the feedback.

Which step: ``step_of()`` (the trainer's ``global_steps``: ``fit`` sets it to the step about to run
before drawing its batch). The proposal is a function of (seed, step, curriculum state), and the
curriculum state is saved with every verl checkpoint (``VICuRLTrainer._save_checkpoint``), so a
resumed run draws the batches of an uninterrupted one, even when verl skips restoring the
dataloader at an epoch boundary. The iterator is ``Stateful`` (position within the epoch) so that
torchdata restores it instead of fast-forwarding it (which would call ``propose``).
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

from torch.utils.data import Sampler

from vicurl.curriculum import Curriculum
from vicurl.engines import step as engine_step


def proposes(curriculum: Curriculum) -> bool:
    """Whether the curriculum chooses its own prompts (overrides ``Curriculum.propose``)."""
    return type(curriculum).propose is not Curriculum.propose


class CurriculumSampler(Sampler[int]):
    """Dataset indices of each step's prompts, as ``curriculum.propose`` chooses them.

    ``ids[i]``: the prompt id of dataset row ``i`` (verl's parquet keeps the training set's order).
    One epoch is ``len(ids) // batch_size`` batches (verl's ``drop_last``), as with verl's default
    sampler, so ``len(train_dataloader)`` and the epoch arithmetic of ``fit`` are unchanged.
    """

    def __init__(self, curriculum: Curriculum, ids: Sequence[str], batch_size: int, seed: int,
                 step_of: Callable[[], int] | None = None):
        self.curriculum = curriculum
        self.ids = [str(i) for i in ids]
        self.index_of = {pid: i for i, pid in enumerate(self.ids)}
        if len(self.index_of) != len(self.ids):
            raise ValueError("training set ids are not unique")
        self.batch_size, self.seed = int(batch_size), int(seed)
        self.step_of = step_of
        self.drawn: dict[int, list[str]] = {}  # step -> the ids proposed (the hook checks the batch against it)

    def batch(self, step: int) -> list[int]:
        """The dataset indices of step ``step``'s prompts (1-based step), in the proposed order."""
        default = [self.ids[i] for i in engine_step.batch_indices(len(self.ids), self.batch_size, self.seed, step)]
        chosen = [str(i) for i in self.curriculum.propose(step, default)]
        if len(chosen) != self.batch_size:
            raise RuntimeError(f"curriculum {self.curriculum.name!r} proposed {len(chosen)} prompts for a batch of "
                               f"{self.batch_size}")
        unknown = [i for i in chosen if i not in self.index_of]
        if unknown:
            raise RuntimeError(f"curriculum {self.curriculum.name!r} proposed unknown prompt(s) {unknown[:3]}")
        self.drawn = {step: chosen}
        return [self.index_of[i] for i in chosen]

    def __len__(self) -> int:
        return (len(self.ids) // self.batch_size) * self.batch_size

    def __iter__(self) -> "_EpochIterator":
        return _EpochIterator(self)

    # the sampler itself has no state: the curriculum's is saved with the checkpoint
    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


class _EpochIterator(Iterator[int]):
    """One epoch of indices, a batch proposed when its first index is asked for."""

    def __init__(self, sampler: CurriculumSampler):
        self.sampler = sampler
        self.yielded = 0
        self.current: list[int] = []

    def __iter__(self) -> "_EpochIterator":
        return self

    def __next__(self) -> int:
        s = self.sampler
        if self.yielded >= len(s):
            raise StopIteration
        pos = self.yielded % s.batch_size
        if pos == 0:
            if s.step_of is None:
                raise RuntimeError("CurriculumSampler: no step source (VICuRLTrainer binds its global_steps)")
            self.current = s.batch(int(s.step_of()))
        self.yielded += 1
        return self.current[pos]

    def state_dict(self) -> dict[str, Any]:
        return {"yielded": self.yielded}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        yielded = int(state["yielded"])
        if yielded % self.sampler.batch_size:
            raise RuntimeError(f"CurriculumSampler: a checkpoint taken inside a batch ({yielded} indices drawn)")
        self.yielded, self.current = yielded, []
