"""`xlnet-transfer` from the checkout:
xlnet_tf/cli/transfer.py."""

from xlnet_tf.cli import transfer

if __name__ == "__main__":
  transfer.entry()
