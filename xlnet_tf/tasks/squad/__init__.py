"""SQuAD-style question answering: reading, windows with character alignment, answer
decoding, and the official EM / F1 with the null-answer threshold."""

from xlnet_tf.tasks.squad.features import SquadExample, answer_text, build_features, read_squad

__all__ = ["SquadExample", "answer_text", "build_features", "read_squad"]
