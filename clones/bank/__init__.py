"""The bank clone, modelled on the China Construction Bank mobile app (com.chinamworld.main).

Invented data, Chinese labels as in the real app, no logos. Money is integer fen throughout.
"""

from clones.bank.app import Bank
from clones.base import register

register(Bank, "bank")

__all__ = ["Bank"]
