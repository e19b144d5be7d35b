"""The exceptions star.torch raises. Each message names the cause (the field, the
variable, the peer) and what to do about it."""


class StarError(RuntimeError):
    """Base class of every STAR error."""


class ConfigError(StarError, ValueError):
    """A bad argument or STAR_* environment variable (missing, malformed, unsupported)."""


class PeerError(StarError, ConnectionError):
    """Another worker is gone, late beyond the timeout, or disagrees on a decision. The
    job cannot go on from this worker: stop it (the other workers get the same error
    within the timeout, they do not hang)."""


class StateError(StarError):
    """Calls in the wrong order (step() before init(), a second init(), ...), or an
    engine that failed earlier."""
