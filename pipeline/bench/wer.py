"""Word error rate: the speech-recognition task's figure against the true transcripts and its answer check against
the CPU float32 reference's transcripts.

WER is the word-level edit distance (substitutions + deletions + insertions, each counting one) over the
reference's words, summed over the clips before dividing (the corpus WER, as jiwer and the Open ASR Leaderboard
compute it over a test set), after a light normalisation both sides get: lower case, every character that is no
letter, digit or apostrophe a space, whitespace collapsed. It can exceed 1 (a transcript with more words than the
reference, all wrong). An empty reference counts each word of its hypothesis as an insertion over one word, so a
clip with nothing to say still counts when something is said.
"""

from __future__ import annotations

from collections.abc import Sequence


def normalise(text: str) -> list[str]:
    """The words of ``text`` as WER compares them."""
    kept = "".join(ch if ch.isalnum() or ch == "'" else " " for ch in text.lower())
    return kept.split()


def edit_distance(reference: Sequence[str], hypothesis: Sequence[str]) -> int:
    """Levenshtein distance between two word lists (one row of the table kept at a time)."""
    previous = list(range(len(hypothesis) + 1))
    for i, word in enumerate(reference, start=1):
        current = [i]
        for j, other in enumerate(hypothesis, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (word != other)))
        previous = current
    return previous[-1]


def word_error_rate(references: Sequence[str], hypotheses: Sequence[str]) -> float:
    """The corpus WER of ``hypotheses`` against ``references``, clip by clip.

    Raises:
        ValueError: the two lists differ in length (a clip without its transcript).
    """
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(hypotheses)} transcript(s) for {len(references)} reference(s)")
    edits = words = 0
    for reference, hypothesis in zip(references, hypotheses, strict=True):
        ref, hyp = normalise(reference), normalise(hypothesis)
        edits += edit_distance(ref, hyp)
        words += len(ref) or (1 if hyp else 0)
    return edits / words if words else 0.0
