"""Trained models shipped with the toolkit (weights in wfstdecode/data/transducer/)."""

from .speech_transducer import SpeechTransducer, load_speech_transducer

__all__ = ["SpeechTransducer", "load_speech_transducer"]
