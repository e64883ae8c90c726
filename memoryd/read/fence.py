"""The fence around memory in the block: two lines that no memory text can forge.

The summaries come from a consolidator that read other sessions (and so, perhaps, a hostile web
page), or from a user's hand edit. A line in them that passes for the block's end line would make
the text after it read as outside memory, as if memoryd had written it. Three layers stop that:

* **A token memory text cannot know.** Both fence lines carry :func:`fence_token`, 20 random
  digits made once per install (``Paths.fence_token``, mode 0600, created atomically) and kept, so
  the block stays byte-identical across turns and restarts. The template tells the model that
  only the lines carrying it delimit memory, and :func:`neutralise` removes the token from memory
  text, in case a model copied it from its own block into a note.
* **Normalised text** (:func:`normalise`). Line breaks other than ``\\n`` (CR, VT, FF, NEL,
  U+2028/2029, the information separators) become ``\\n``, so a line is a line for the model and
  for the checks alike. Invisible characters go: every format character (category Cf: zero-width
  spaces and joiners, word joiner, bidi marks, embeddings, overrides and isolates, BOM, soft
  hyphen, tag characters, interlinear annotations), other control characters, and the rest of
  Unicode's default-ignorable set (variation selectors, the combining grapheme joiner, Hangul
  fillers, Mongolian selectors). Bidi controls go rather than stay balanced because they make the
  order a person sees differ from the order the model reads; variation selectors only pick a
  glyph, so an emoji may lose its colour form. Then NFKC folds compatibility forms (fullwidth
  ``＝``, small ``﹦``, super- and subscripts, ``⩵``) into plain characters, so ``x²`` reads
  ``x2`` in the block (the memory files keep what was written). Combining marks stay: many
  scripts need them.
* **Fence-like lines neutralised** (:func:`neutralise`). Each line is judged on a skeleton:
  decomposed, combining marks dropped, characters drawn as two or more horizontal strokes
  (:data:`EQUALS_LIKE`: ``═ ⹀ ゠ ꞊ 〓 ≡ ≐ ᐀ 🟰``, the combining double low line …) read as ``=``,
  Latin lookalikes from other scripts read as Latin, case folded. A line naming BEGIN or END
  MEMORY in any case or spacing, forwards or backwards, is replaced by :data:`PLACEHOLDER` (the
  cost: a line that says "the end; memory…" is dropped from the block, never from the files). A
  line with four or more ``=`` in a run (spaces between allowed) has each run folded to one ``=``
  and its combining marks dropped, which keeps a Markdown heading underline working.

The checks run on what the block carries, after redaction and again after the middle cut, so the
guarantee is about the bytes the model receives.
"""

from __future__ import annotations

import re
import secrets
import stat
import time
import unicodedata

from memoryd.errors import NotRegularFile, PathError
from memoryd.fsutil import create_once, lstat_or_none, read_regular
from memoryd.paths import Paths

__all__ = [
    "BEGIN_LINE",
    "END_LINE",
    "EQUALS_LIKE",
    "PLACEHOLDER",
    "fence_like",
    "fence_lines",
    "fence_token",
    "neutralise",
    "normalise",
]

BEGIN_LINE = "===== BEGIN MEMORY SUMMARY {token} ====="
END_LINE = "===== END MEMORY SUMMARY {token} ====="
PLACEHOLDER = "[a line that imitated the memory fence was removed]"

# 20 decimal digits (66 random bits): tiktoken cuts digits in threes, so every token costs the
# same 7 tokens and the instructions' overhead is the same on every install.
TOKEN_DIGITS = 20
_TOKEN_RE = re.compile(f"[0-9]{{{TOKEN_DIGITS}}}")
_TOKEN_TRIES = 20  # a reader that meets a creator's temp link looks again this often, 10 ms apart
_tokens: dict[str, str] = {}  # per process: the no-change path of the block reads no file for it

# --- the token ---------------------------------------------------------------------------------


def fence_token(paths: Paths) -> str:
    """This install's fence token, made on first use (see the module docstring)."""
    key = str(paths.fence_token)
    token = _tokens.get(key)
    if token is None:
        token = _tokens[key] = _load_or_create(paths)
    return token


def fence_lines(token: str) -> tuple[str, str]:
    return BEGIN_LINE.format(token=token), END_LINE.format(token=token)


def _load_or_create(paths: Paths) -> str:
    path = paths.fence_token
    for _ in range(_TOKEN_TRIES):
        try:
            data = read_regular(path, limit=256)
        except NotRegularFile:
            # Another creator between its link and its unlink shows the file with two names; by
            # the lstat it may have one again (read it once more). Anything else is refused.
            st = lstat_or_none(path)
            if st is not None and (not stat.S_ISREG(st.st_mode) or st.st_nlink > 2):
                raise
            time.sleep(0.01)
            continue
        if data is None:
            paths.ensure_dir(path.parent)
            token = f"{secrets.randbelow(10**TOKEN_DIGITS):0{TOKEN_DIGITS}d}"
            create_once(path, (token + "\n").encode("ascii"))
            continue  # read back whichever token won
        token = data.decode("ascii", errors="replace").strip()
        if not _TOKEN_RE.fullmatch(token):
            raise PathError(path, "is not a fence token memoryd made; remove it to get a new one")
        return token
    raise PathError(path, "could not be created and read back")


# --- normalising what the block carries --------------------------------------------------------

_BREAKS = str.maketrans(dict.fromkeys("\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029", "\n"))
_ASCII_CONTROLS = str.maketrans(
    dict.fromkeys([chr(c) for c in range(0x20) if chr(c) not in "\t\n"] + ["\x7f"])
)
# Default-ignorable code points that are not format characters (DerivedCoreProperties.txt),
# plus the unassigned ones in its ranges, which a newer Unicode may make format characters.
_IGNORABLE_RANGES = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
_IGNORABLE = frozenset(c for lo, hi in _IGNORABLE_RANGES for c in range(lo, hi + 1))


def _visible(ch: str) -> bool:
    category = unicodedata.category(ch)
    if category == "Cf" or (category == "Cc" and ch not in "\t\n"):
        return False
    return ord(ch) not in _IGNORABLE


def normalise(text: str) -> str:
    """One kind of line break, no invisible characters, NFKC (see the module docstring)."""
    text = text.replace("\r\n", "\n").translate(_BREAKS)
    if text.isascii():
        return text.translate(_ASCII_CONTROLS)
    text = "".join(ch for ch in text if _visible(ch))
    return unicodedata.normalize("NFKC", text)


# --- fence-like lines --------------------------------------------------------------------------

# Drawn as two or more horizontal strokes, so a run of them passes for "=====". NFKC already
# folds the fullwidth, small, superscript and subscript equals signs and ⩵ ⩶ into "=".
EQUALS_LIKE = (
    "="
    "\u0333\u033f\u0347"  # combining double low line, double overline, equals sign below
    "\u1400"  # Canadian syllabics hyphen
    "\u2250-\u225f"  # = with a dot, ring, star, question mark … above it
    "\u2261-\u2263"  # ≡ ≢ ≣
    "\u229c\u22cd\u22d5"  # ⊜ ⋍ ⋕
    "\u2550\u2552\u2554\u2555\u2557\u2558\u255a\u255b\u255d\u255e\u2560\u2561"
    "\u2563\u2564\u2566\u2567\u2569\u256a\u256c"  # box drawing with a double horizontal
    "\u2630\u268c-\u268f"  # ☰ and the digrams ⚌ ⚍ ⚎ ⚏
    "\u29e3-\u29e6"  # = and ≡ with slanted parallels
    "\u2a66\u2a67\u2a6e\u2a71-\u2a73\u2a77\u2a78\u2aae"  # = with dots, *, +, ~ or a bump
    "\u2bf9"  # = with infinity below
    "\u2e17\u2e40"  # ⸗ ⹀ double oblique hyphen, double hyphen
    "\u3013\u30a0"  # 〓 geta mark, ゠ katakana-hiragana double hyphen
    "\ua78a"  # ꞊ modifier letter short equals sign
    "\U0001d301-\U0001d305"  # Tai Xuan Jing digrams
    "\U0001f7f0"  # 🟰 heavy equals sign
)
_EQ_CLASS = re.compile(f"[{EQUALS_LIKE}]")
_RUN = re.compile(r"=(?:\s*=){3,}")
_ANY_RUN = re.compile(r"=(?:\s*=)+")

# Latin lookalikes for the letters of BEGIN, END and MEMORY (Cyrillic, Greek, Armenian, Cherokee,
# Lisu, small capitals, digits): enough that a forged name needs more than a script switch.
_LOOKALIKES = {
    "b": "ВвЬьΒβƄƅʙꓐᏴ",
    "d": "ԀԁɗᴅᎠꓒꓓ",
    "e": "ЕеЁёЄєҼҽΕεℯ℮ᴇꓰᎬ3",
    "g": "ɡɢԌԍցᏀꓖ",
    "i": "ІіЇїӀӏΙιıɪꓲl1|!",
    "m": "МмΜϺᴍꓟᎷ",
    "n": "ΝոɴꓠՌ",
    "o": "ОоΟοՕօᴏꓳ0",
    "r": "гʀꓣᏒ",
    "y": "УуҮүΥγʏꓬᎩ",
}
_SKELETON = str.maketrans(
    {ch: latin for latin, chars in _LOOKALIKES.items() for ch in chars}
    | dict.fromkeys("\u0333\u033f\u0347", "=")
)
_SEP = r"[\W_]*"


def _word(letters: str) -> str:
    return _SEP.join(letters)


_NAME = re.compile(
    rf"(?<![^\W_])(?:{_word('begin')}|{_word('end')})"
    rf"(?:{_SEP}(?:of|the))*{_SEP}{_word('memory')}"
)


def _strip_marks(text: str) -> str:
    return "".join(ch for ch in text if not unicodedata.category(ch).startswith("M"))


def _skeleton(line: str) -> str:
    decomposed = unicodedata.normalize("NFD", line) if not line.isascii() else line
    mapped = _EQ_CLASS.sub("=", decomposed.translate(_SKELETON))
    return _strip_marks(mapped).casefold()


def _names_the_fence(skeleton: str) -> bool:
    # Reversed too: text written backwards behind a right-to-left override reads forwards on
    # screen, and the override itself is gone by now.
    return bool(_NAME.search(skeleton) or _NAME.search(skeleton[::-1]))


def fence_like(line: str) -> bool:
    """Whether one line (already normalised) could pass for a fence line."""
    skeleton = _skeleton(line)
    return _names_the_fence(skeleton) or bool(_RUN.search(skeleton))


def _neutral(line: str) -> str:
    skeleton = _skeleton(line)
    if _names_the_fence(skeleton):
        return PLACEHOLDER
    if not _RUN.search(skeleton):
        return line
    flat = _strip_marks(_EQ_CLASS.sub("=", unicodedata.normalize("NFD", line)))
    return unicodedata.normalize("NFC", _ANY_RUN.sub("=", flat))


def neutralise(text: str, token: str) -> str:
    """``text`` (normalised) with the fence token removed and no line that could pass for a
    fence line (see the module docstring)."""
    if token:
        text = text.replace(token, "")
    return "\n".join(_neutral(line) for line in text.split("\n"))
