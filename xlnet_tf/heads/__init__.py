"""Task heads over XLNetModel: permutation-LM pretraining, classification/regression, multiple
choice, SQuAD-style question answering, token tagging."""

from xlnet_tf.heads.base import XLNetHead
from xlnet_tf.heads.classifier import XLNetClassifier
from xlnet_tf.heads.multiple_choice import XLNetMultipleChoice
from xlnet_tf.heads.pretrainer import XLNetPretrainer, lm_loss_sum, masked_lm_loss
from xlnet_tf.heads.question_answering import XLNetQuestionAnswering, squad_loss
from xlnet_tf.heads.summary import SequenceSummary
from xlnet_tf.heads.token_classifier import XLNetTokenClassifier, token_loss

__all__ = ["SequenceSummary", "XLNetClassifier", "XLNetHead", "XLNetMultipleChoice",
           "XLNetPretrainer", "XLNetQuestionAnswering", "XLNetTokenClassifier", "lm_loss_sum",
           "masked_lm_loss", "squad_loss", "token_loss"]
