"""Text: the XLNet tokenizer (Python and in-graph), SentencePiece training, the original
`A <sep> B <sep> <cls>` packing, XLNetPreprocessor (strings -> packed inputs, a Keras layer)
and the read reports of every reader."""

from xlnet_tf.text.packing import (SEG_A, SEG_B, SEG_CLS, SEG_PAD, pack_pair, pack_texts,
                                   truncate_pair)
from xlnet_tf.text.preprocessor import XLNetPreprocessor
from xlnet_tf.text.read_report import ReadReport
from xlnet_tf.text.sentencepiece_training import train_sentencepiece
from xlnet_tf.text.tokenizer import XLNetTokenizer, preprocess_text

__all__ = ["ReadReport", "SEG_A", "SEG_B", "SEG_CLS", "SEG_PAD", "XLNetPreprocessor",
           "XLNetTokenizer", "pack_pair", "pack_texts", "preprocess_text", "train_sentencepiece",
           "truncate_pair"]
