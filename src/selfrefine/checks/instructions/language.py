"""Which language a draft is written in: ``langdetect`` (the detector IFEval's verifier uses),
offline (its profiles ship in the package), seeded so that a draft reads the same every time.
"""

from __future__ import annotations

import threading
from typing import Any, Literal

LANGUAGES = {
    "af": "Afrikaans", "ar": "Arabic", "bg": "Bulgarian", "bn": "Bengali", "ca": "Catalan", "cs": "Czech",
    "cy": "Welsh", "da": "Danish", "de": "German", "el": "Greek", "en": "English", "es": "Spanish",
    "et": "Estonian", "fa": "Persian", "fi": "Finnish", "fr": "French", "gu": "Gujarati", "he": "Hebrew",
    "hi": "Hindi", "hr": "Croatian", "hu": "Hungarian", "id": "Indonesian", "it": "Italian", "ja": "Japanese",
    "kn": "Kannada", "ko": "Korean", "lt": "Lithuanian", "lv": "Latvian", "mk": "Macedonian", "ml": "Malayalam",
    "mr": "Marathi", "ne": "Nepali", "nl": "Dutch", "no": "Norwegian", "pa": "Punjabi", "pl": "Polish",
    "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sk": "Slovak", "sl": "Slovenian", "so": "Somali",
    "sq": "Albanian", "sv": "Swedish", "sw": "Swahili", "ta": "Tamil", "te": "Telugu", "th": "Thai",
    "tl": "Tagalog", "tr": "Turkish", "uk": "Ukrainian", "ur": "Urdu", "vi": "Vietnamese",
    "zh-cn": "Chinese (simplified)", "zh-tw": "Chinese (traditional)",
}  # fmt: skip
LanguageCode = Literal[
    "af", "ar", "bg", "bn", "ca", "cs", "cy", "da", "de", "el", "en", "es", "et", "fa", "fi", "fr", "gu", "he", "hi",
    "hr", "hu", "id", "it", "ja", "kn", "ko", "lt", "lv", "mk", "ml", "mr", "ne", "nl", "no", "pa", "pl", "pt", "ro",
    "ru", "sk", "sl", "so", "sq", "sv", "sw", "ta", "te", "th", "tl", "tr", "uk", "ur", "vi", "zh-cn", "zh-tw",
]  # fmt: skip
MAX_DETECT_CHARS = 20_000  # the detector reads 10,000 characters once links and addresses are removed

_factory: Any = None
_lock = threading.Lock()


def _detector_factory() -> Any:
    """langdetect's profiles, loaded once (a second or so), with a fixed seed."""
    global _factory
    with _lock:
        if _factory is None:
            from langdetect.detector_factory import PROFILES_DIRECTORY, DetectorFactory

            factory = DetectorFactory()
            factory.load_profile(PROFILES_DIRECTORY)
            factory.seed = 0  # langdetect samples at random; seeded, a draft reads the same every time
            _factory = factory
    return _factory


def detect(text: str) -> str | None:
    """The language code ``text`` reads as, or None when it has nothing to tell by (no letters)."""
    from langdetect.lang_detect_exception import LangDetectException

    detector = _detector_factory().create()
    detector.append(text[:MAX_DETECT_CHARS])
    try:
        return str(detector.detect())
    except LangDetectException:
        return None
