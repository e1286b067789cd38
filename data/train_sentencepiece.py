"""`xlnet-train-sentencepiece` from the checkout:
xlnet_tf/cli/train_sentencepiece.py."""

from xlnet_tf.cli import train_sentencepiece

if __name__ == "__main__":
  train_sentencepiece.entry()
