"""spillway: open up Apache Flink checkpoints — above all the channel state of unaligned checkpoints."""

__version__ = "0.1.0"
