"""What the page says under a prediction it labels a guess: the likelier cause, the image or the model
served (a partial run, or one that scores low on the test set, guesses whatever the image)."""

from __future__ import annotations

from steps.lib.promotion import partial_reason
from ui.predict import LOW_CONFIDENCE

# A run with the defaults scores about 99% on the test set (docs/results.md): under this, the model
# served is the likelier cause of a guess.
WEAK_ACCURACY = 0.95


def guess_text(accuracy: float | None, settings: dict, metrics: dict) -> str:
    """The warning under a low-confidence prediction, for the model whose test `accuracy`, card
    `settings` and `metrics` are given (None, {}: not known)."""
    said = f"Low confidence (under {LOW_CONFIDENCE:.0%}): this is a guess."
    partial = partial_reason(settings, metrics)
    weak = accuracy is not None and accuracy < WEAK_ACCURACY
    if not (weak or partial):
        return f"{said} Try a clearer image, one digit filling most of it."
    facts = [f"{accuracy:.2%} on the test set"] if accuracy is not None else []
    if partial:
        facts.append(f"trained on part of the data ({partial})")
    return (
        f"{said} The model served is a weak one ({', '.join(facts)}): a clearer image may not help."
    )
