"""The toy shop, the minimal example clone (see docs/adding-a-clone.md and taskpacks/toy/)."""

from clones.base import register
from clones.toy.app import TOY, ToyShop

register(ToyShop, TOY)

__all__ = ["TOY", "ToyShop"]
