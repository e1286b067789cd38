"""SQuAD-style question answering: reading, windows with character alignment, answer
decoding, the official EM / F1 with the null-answer threshold, and the task a run drives
(SquadOptions, SquadTask)."""

from xlnet_tf.tasks.squad.features import SquadExample, answer_text, build_features, read_squad
from xlnet_tf.tasks.squad.task import SquadOptions, SquadTask

__all__ = ["SquadExample", "SquadOptions", "SquadTask", "answer_text", "build_features",
           "read_squad"]
