"""Clone apps and the clone server. See `clones.base` for the contract every clone follows."""
