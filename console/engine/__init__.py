"""The engine side of a round: where the trees come from (sources), the images they are built
in (images), how an engine's output is read (protocol, adapters) and the reference it is graded
against (reference)."""
