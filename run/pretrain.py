"""`xlnet-pretrain` from the checkout:
xlnet_tf/cli/pretrain.py."""

from xlnet_tf.cli import pretrain

if __name__ == "__main__":
  pretrain.entry()
