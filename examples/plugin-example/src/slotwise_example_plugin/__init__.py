"""An example slotwise metric plugin: ``example-junk-at-k``."""

from slotwise_example_plugin.junk import JunkAtK

__all__ = ["JunkAtK"]
