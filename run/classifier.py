"""`xlnet-classify` from the checkout:
xlnet_tf/cli/classifier.py."""

from xlnet_tf.cli import classifier

if __name__ == "__main__":
  classifier.entry()
