"""`TransducerCorpusDecoder`: corpus shards decoded with a transducer (RNN-T / TDT), greedy or
beam search — the shards ``wfstdecode decode-transducer`` reads (``enc`` encoder outputs, or
``log_probs`` hama posteriors the shipped speech transducers encode themselves)."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from ..errors import OptionsError
from ..results import frame_shift_problem
from .shards import decode_shard


@dataclass(frozen=True)
class TransducerCorpusDecoder:
    """model:       ``"rnnt"`` / ``"tdt"`` (shipped) or a `SpeechTransducer` ``.npz``;
    beam:        `BeamOptions` (the model's durations are filled in), or None for greedy;
    num_threads: torch threads per worker;
    frame_shift: seconds per encoder frame (default: the model's ``frame_seconds``).

    Each line carries the hypothesis' tokens, their frames (and TDT durations), and the words a
    character model spells with their frames (`speech.transcribe.spelled_words`: a TDT
    character's run to the end of its duration)."""

    shard_suffixes: ClassVar[tuple[str, ...]] = (".npz",)
    model: str
    beam: object = None
    num_threads: int | None = 1
    frame_shift: float | None = None
    _model_id: str = field(default="", compare=False, repr=False)

    backend = "cpu"  # workers need no GPU (the pools ask for one only for "cuda")

    def __post_init__(self):
        from ..ctc.tuning import int_at_least
        from ..transducer import BeamOptions

        # (0 would leave torch's default silently, a negative count fail in every worker)
        int_at_least("TransducerCorpusDecoder", "num_threads", self.num_threads, 1,
                      allow_none=True)  # fmt: skip
        if self.beam is not None and not isinstance(self.beam, BeamOptions):
            raise OptionsError(
                f"beam must be a BeamOptions or None; got {type(self.beam).__name__}"
            )
        model = self._load()  # a bad model fails here, in the driver, before any worker starts
        if self.beam is not None:  # ... and so does a search that cannot decode it
            self.beam.for_model(tuple(getattr(model, "durations", ()) or ()) or None)
        if self.model not in ("rnnt", "tdt"):
            object.__setattr__(self, "model", str(Path(self.model).absolute()))
        shift = self.frame_shift if self.frame_shift is not None else getattr(
            model, "frame_seconds", None
        )  # fmt: skip
        if shift is not None and (problem := frame_shift_problem(shift)):
            raise OptionsError(f"frame_shift {problem}")
        # (a NumPy float32 is no JSON for the run's config)
        object.__setattr__(self, "frame_shift", None if shift is None else float(shift))
        object.__setattr__(self, "_model_id", _parameters_digest(model))

    def config(self) -> dict:
        return {
            "decoder": "transducer",
            "model_content": self._model_id,
            "beam": dataclasses.asdict(self.beam) if self.beam is not None else None,
            "frame_shift": self.frame_shift,
            # torch's threads split its sums differently (scores differ in the 7th digit): a run
            # resumed with another count would mix the two
            "num_threads": self.num_threads,
        }

    def load(self):
        import torch

        if self.num_threads:
            torch.set_num_threads(self.num_threads)
        model = self._load()
        return lambda path, name: decode_shard(
            Path(path),
            name,
            lambda p: self._run(model, p),
            self.frame_shift,
            tokens=True,
            nbest=self.beam.nbest if self.beam is not None else 1,
            durations=bool(getattr(model, "durations", ())),
        )

    def _load(self):
        from ..transducer.files import load_transducer_model

        return load_transducer_model(self.model)

    def _run(self, model, path: Path):
        from ..speech.transcribe import spelled_words
        from ..transducer.files import decode_transducer_npz

        result = decode_transducer_npz(model, path, self.beam)
        hypotheses = result.hypotheses
        tokens = getattr(model, "tokens", None)
        if tokens is not None and tokens.get("|") is not None:  # a character model: words
            hypotheses = [[spelled_words(h, tokens, frames=n) for h in hyps]
                          for hyps, n in zip(hypotheses, result.lengths, strict=True)]  # fmt: skip
        return result.ids, hypotheses, result.lengths, result.references


def _parameters_digest(model) -> str:
    """What identifies a model's results: its parameters and durations."""
    digest = hashlib.sha256(repr(tuple(getattr(model, "durations", ()) or ())).encode())
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


__all__ = ["TransducerCorpusDecoder"]
