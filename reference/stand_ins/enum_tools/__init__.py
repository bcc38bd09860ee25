"""Stand-in for the enum_tools package, which DI-engine's interaction code
imports only to decorate its enums for documentation. Debian does not package
it; the decorator changes nothing at run time, so ours returns the enum as is."""
from . import documentation  # noqa: F401
