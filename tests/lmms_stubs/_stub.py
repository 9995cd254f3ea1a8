"""What the stand-in packages share (a module on the probe's path, not a package of its own)."""


def missing(package: str):
    """A module ``__getattr__`` (PEP 562): a name the stand-in does not define is an error."""

    def __getattr__(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"{package}.{name}: {package} is a stand-in here (tests/lmms_stubs), "
                             "not the real package")

    return __getattr__


def unavailable(qualname: str):
    """A function or method that would do real work: calling it is an error."""

    def call(*args, **kwargs):
        raise RuntimeError(f"{qualname} called, but it is a stand-in here (tests/lmms_stubs)")

    call.__qualname__ = call.__name__ = qualname.rsplit(".", 1)[-1]
    return call
