"""The facts view: the guarantee card every page shows, read from one source of quantities."""
