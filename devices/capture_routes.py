"""A capture's label must name a screen the clone can show: checked before the phone is touched.

`realbench fidelity` renders the clone screen a label names; a label with a route no clone has
would only fail there, long after the capture. The check needs the clones, so it lives here.
"""

from __future__ import annotations

from realbench.errors import ConfigError


def check_label_route(clone: str | None, route: str) -> None:
    """The named clone (or, with none named, some registered clone) has `route`."""
    import clones.registry  # noqa: F401  (registers the built-in clones)
    from clones.base import clone_names, get_clone

    names = [clone] if clone else clone_names()
    known: dict[str, list[str]] = {}
    for name in names:
        routes = get_clone(name).routes()  # an unknown clone name raises UnknownNameError
        if route in routes:
            return
        known[name] = routes
    listing = "; ".join(f"{name}: {', '.join(sorted(r))}" for name, r in known.items())
    where = f"clone {clone!r}" if clone else "any clone"
    raise ConfigError(
        f"label route {route!r} is not a screen of {where}",
        hint=f"label as <clone>/<route>[?task=…]; routes — {listing}",
    )
