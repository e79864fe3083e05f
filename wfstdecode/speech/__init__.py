"""Speech in: audio files -> hama's phone CTC posteriors -> the toolkit's decoders.

Needs the ``speech`` extra (PyPI hama, soundfile) only when a model runs; importing this package
does not import hama.
"""

from .audio import load_audio, read_audio, resample
from .graph import load_speech_graph, speech_graph_dir
from .phone_model import HamaPhoneModel
from .transcribe import SPEECH_OPTIONS, iter_transcribe, transcribe, transcribe_transducer

__all__ = [
    "SPEECH_OPTIONS",
    "HamaPhoneModel",
    "iter_transcribe",
    "load_audio",
    "load_speech_graph",
    "read_audio",
    "resample",
    "speech_graph_dir",
    "transcribe",
    "transcribe_transducer",
]
