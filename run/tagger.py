"""`xlnet-tag` from the checkout:
xlnet_tf/cli/tagger.py."""

from xlnet_tf.cli import tagger

if __name__ == "__main__":
  tagger.entry()
