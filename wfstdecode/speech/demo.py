"""The main job: real LibriVox speech (shipped) -> hama phone log-probs -> the shipped speech
graph -> words, with greedy phones, the TLG words and the word error rate printed."""

from __future__ import annotations

import time

from ..metrics import edit_distance
from .graph import CLIPS, load_speech_graph
from .phone_model import HAMA_VERSION, HamaPhoneModel
from .transcribe import SPEECH_OPTIONS, decode_log_probs, read_transcripts


def run_speech_demo(backend: str = "cpu") -> dict:
    """Decode the shipped clips, print them; returns {"wer", "errors", "words", "clips"}."""
    references = read_transcripts(CLIPS / "transcripts.tsv")
    model = HamaPhoneModel()
    start = time.process_time()
    rows = [model.log_probs_of_file(CLIPS / f"{utt}.wav") for utt in references]
    model_seconds = time.process_time() - start
    audio_seconds = sum(len(r) for r in rows) * model.frame_seconds
    print(f"{len(rows)} LibriVox clips ({audio_seconds:.1f} s of speech) -> hama {HAMA_VERSION} "
          f"phone CTC model: {model_seconds:.2f} CPU s")  # fmt: skip
    graph = load_speech_graph()
    start = time.process_time()
    hyps = decode_log_probs(rows, graph, SPEECH_OPTIONS, backend=backend, model=model)
    search_seconds = time.process_time() - start
    errors = words = 0
    for (utt, ref), row, hyp in zip(references.items(), rows, hyps, strict=True):
        phones = " | ".join(" ".join(w) for w in model.greedy_phones(row))
        e = edit_distance(ref, hyp[0].words)
        errors, words = errors + e, words + len(ref)
        print(f"\n{utt} ({len(row) * model.frame_seconds:.1f} s)"
              f"\n  reference:     {' '.join(ref)}\n  greedy phones: {phones}"
              f"\n  TLG words:     {hyp[0].text}   ({e} errors)")  # fmt: skip
    wer = errors / max(words, 1)
    print(f"\nWER {100 * wer:.1f}% ({errors} errors / {words} words); TLG search "
          f"{search_seconds:.2f} CPU s incl. compilation ({backend} backend)\n"
          f"{SPEECH_OPTIONS}")  # fmt: skip
    return {"wer": wer, "errors": errors, "words": words, "clips": len(rows)}
